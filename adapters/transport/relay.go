package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// Names of the relays opledger runs, which are also their checkpoints'
// names. Never rename one: a renamed relay starts from the beginning of the
// log (harmless, since message ids are stable, but slow).
const (
	RelayRefundRequests  = "refund-requests"  // SelectRefundRequests
	RelaySecuritySignals = "security-signals" // SelectSecuritySignals
)

// Outbound is one message a Relay publishes.
type Outbound struct {
	Topic     string
	Key       string // the ordering key: the operation id
	MessageID string // stable per source event
	Value     []byte
	Headers   map[string]string
}

// Publisher hands messages to a transport.
//
// Publish returns nil only when every message is durably accepted (Kafka:
// acknowledged by the in-sync replicas; Postgres: committed). On an error
// some may have been accepted. Publishing the same message ids again must be
// harmless to the transport: the consumer side absorbs copies by message id.
// Implementations are safe for concurrent use.
type Publisher interface {
	Publish(ctx context.Context, msgs []Outbound) error
}

// Pinger is what a Publisher may also offer: Ping says whether the
// transport can be reached without publishing anything (kafka.Publisher
// does). An idle leader pings every PingInterval, so an unreachable
// transport shows in its Status (StagePublish) before there is anything to
// publish.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Checkpoints persists where each relay stands in the log, as the text of a
// position (eventstore.Position.String). Load returns "" for a relay that
// never saved one (the start of the log).
type Checkpoints interface {
	Load(ctx context.Context, name string) (string, error)
	Save(ctx context.Context, name, position string) error
}

// Selector maps one log event to the messages to publish for it (none for
// most events). An error means the event cannot be turned into a message
// (undecodable, an unexpected shape): the relay retries it a bounded number
// of times (RelayConfig.Policy) and then sets it aside and moves past it.
type Selector func(rec eventstore.RecordedEvent) ([]Outbound, error)

// ReasonRelaySelectFailed is the set-aside reason of an event a relay could
// not turn into a message.
const ReasonRelaySelectFailed = "relay.select-failed"

// DefaultRelayPolicy bounds the retries of an event the relay cannot turn
// into a message. The whole log waits behind it meanwhile (a relay keeps
// the log's order), so the bound is short: three attempts, 1s then 2s
// apart, then the event is set aside.
var DefaultRelayPolicy = setaside.Policy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 10 * time.Second}

// RelayConfig configures a Relay. Zero values take defaults.
type RelayConfig struct {
	Name        string // required: the checkpoint's name, e.g. "refund-requests"
	Store       eventstore.Store
	Checkpoints Checkpoints
	Publisher   Publisher
	Select      Selector
	Logger      *slog.Logger
	Clock       clock.Clock // default clock.System
	// SetAside keeps the events the relay could not turn into messages
	// (role setaside.RoleRelay, item "<relay name>:<event id>"). Default: an
	// in-memory store, whose counts a restart forgets (serve passes
	// pgqueue.NewSetAside).
	SetAside setaside.Store
	// Policy bounds the retries of such an event (default
	// DefaultRelayPolicy).
	Policy setaside.Policy
	// Leader is the lock the relay publishes under (default: none, the relay
	// always leads). See Leadership.
	Leader Leadership
	// LeaderRetry is how often a standby tries to take the lock, and how
	// long a relay that lost it waits before trying again, so that a waiting
	// standby takes over first (default 1s). LeaderCheck is how often an
	// idle leader checks it still holds the lock (default 1s); it always
	// checks right before publishing.
	LeaderRetry, LeaderCheck time.Duration
	// PingInterval is how often an idle leader pings a Publisher that is a
	// Pinger (default 5s); it pings at once when it starts leading.
	PingInterval time.Duration
	// BatchSize bounds the events read at once, and so the messages
	// published in one Publish call (default 500).
	BatchSize int
	// CheckpointInterval is how often a relay that keeps finding events
	// saves its checkpoint (default 1s, by Clock); it also saves when it
	// finds the log idle (an empty read) and when it stops at a failing
	// event. So a busy log costs one checkpoint write per interval, not one
	// per batch, and a leader that dies publishes at most about an
	// interval's messages again (under the same message ids).
	CheckpointInterval time.Duration
	// PollMin and PollMax bound the pause between empty reads of the log
	// (defaults 10ms, 1s).
	PollMin, PollMax time.Duration
	// Wake, when set, cuts a pause short (a coalesced notifier).
	Wake <-chan struct{}
	// FailureBackoff is the first pause after an outage (the log, the
	// checkpoint, the set-aside store or the transport failed), doubled per
	// consecutive failure up to 30 times it (default 100ms).
	FailureBackoff time.Duration
	// MaxFailures, when positive, bounds consecutive outages: Run then
	// returns the last error. Zero (the default) retries for as long as the
	// context lives: an outage is reported in Status, not by stopping,
	// because nothing a restart does would reach the transport sooner.
	MaxFailures int
}

// Relay follows the global log from its checkpoint and publishes what Select
// maps each event to. Per batch: publish everything; then, once per
// CheckpointInterval and whenever the log is idle, save the checkpoint. A
// crash before a save publishes what followed the saved checkpoint again on
// restart; message ids derived from the events make the copies
// recognisable. Only the holder of the Leader lock publishes.
type Relay struct {
	cfg       RelayConfig
	leader    Leadership
	published atomic.Int64

	mu     sync.Mutex
	status RelayStatus
	// pending holds this relay's events with a recorded failure that are not
	// set aside: cleared from the store once they relay. Only Run's
	// goroutine touches it.
	pending map[string]bool
}

// NewRelay validates cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Name == "" || cfg.Store == nil || cfg.Checkpoints == nil || cfg.Publisher == nil || cfg.Select == nil {
		return nil, errors.New("transport: relay config: Name, Store, Checkpoints, Publisher and Select are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.SetAside == nil {
		cfg.SetAside = &setaside.Memory{}
	}
	cfg.Policy = cmp.Or(cfg.Policy, DefaultRelayPolicy).WithDefaults()
	cfg.LeaderRetry = cmp.Or(cfg.LeaderRetry, time.Second)
	cfg.LeaderCheck = cmp.Or(cfg.LeaderCheck, time.Second)
	cfg.PingInterval = cmp.Or(cfg.PingInterval, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	cfg.CheckpointInterval = cmp.Or(cfg.CheckpointInterval, time.Second)
	cfg.PollMin = cmp.Or(cfg.PollMin, 10*time.Millisecond)
	cfg.PollMax = cmp.Or(cfg.PollMax, time.Second)
	cfg.FailureBackoff = cmp.Or(cfg.FailureBackoff, 100*time.Millisecond)
	var errs []error
	if cfg.BatchSize < 1 || cfg.BatchSize > eventstore.MaxAppendBatch*10 {
		errs = append(errs, fmt.Errorf("batch size %d must be in [1, %d]", cfg.BatchSize, eventstore.MaxAppendBatch*10))
	}
	if cfg.MaxFailures < 0 || cfg.PollMin <= 0 || cfg.PollMax < cfg.PollMin || cfg.FailureBackoff <= 0 || cfg.LeaderRetry <= 0 || cfg.LeaderCheck <= 0 || cfg.PingInterval <= 0 || cfg.CheckpointInterval <= 0 {
		errs = append(errs, errors.New("MaxFailures must not be negative; pauses positive, PollMin <= PollMax"))
	}
	if err := cfg.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.Name) > domain.MaxIDLength {
		errs = append(errs, fmt.Errorf("name longer than %d bytes", domain.MaxIDLength))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("transport: relay config: %w", err)
	}
	r := &Relay{cfg: cfg, leader: cfg.Leader, status: RelayStatus{Name: cfg.Name}}
	if r.leader == nil {
		r.leader = soleLeader{}
	}
	return r, nil
}

// Name returns the relay's name (its checkpoint's).
func (r *Relay) Name() string { return r.cfg.Name }

// Published counts messages this relay published (copies after a failed
// checkpoint included).
func (r *Relay) Published() int64 { return r.published.Load() }

// Run relays until ctx ends, then returns ctx.Err(). It waits for the
// leadership (trying every LeaderRetry), follows the log while it holds
// it, and steps down to wait again when it is lost. Outages are retried
// with a bounded back-off and reported in Status; with MaxFailures set, that
// many in a row make Run return the last error.
func (r *Relay) Run(ctx context.Context) error {
	log := r.cfg.Logger.With("relay", r.cfg.Name)
	defer r.leader.Release(ctx)
	for wait := time.Duration(0); ; {
		if wait > 0 && !pause(ctx, wait, nil) {
			return ctx.Err()
		}
		wait = r.cfg.LeaderRetry
		held, err := r.leader.TryAcquire(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			r.noteFailure(StageLeader, err, r.Status().Failures+1)
			log.WarnContext(ctx, "relay: leader lock unavailable", "err", err)
			continue
		}
		if !held {
			r.noteHealthy() // a standby is healthy: someone else leads
			continue
		}
		r.update(func(s *RelayStatus) { s.Leader = true })
		log.InfoContext(ctx, "relay: leading")
		err = r.lead(ctx, log)
		r.update(func(s *RelayStatus) { s.Leader, s.Retrying = false, "" })
		r.leader.Release(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrLeadershipLost):
			log.WarnContext(ctx, "relay: stepped down; waiting to lead again", "err", err)
		default:
			return fmt.Errorf("relay %s: %w", r.cfg.Name, err)
		}
	}
}

// lead follows the log from the saved checkpoint while the lock holds. It
// returns an error wrapping ErrLeadershipLost when the lock is lost, the
// last error once MaxFailures outages came in a row, or ctx's error.
func (r *Relay) lead(ctx context.Context, log *slog.Logger) error {
	var (
		after     eventstore.Position
		loaded    bool
		poll      = r.cfg.PollMin
		backoff   = r.cfg.FailureBackoff
		failures  int
		lastCheck = time.Now() // the lock was just taken
		lastPing  time.Time    // zero: ping when first idle
		pinger, _ = r.cfg.Publisher.(Pinger)
		// unsaved is how far the relay got past its saved checkpoint (nil:
		// nowhere), with the recovered events to clear once it is saved.
		unsaved   eventstore.Position
		recovered []string
		lastSave  = r.cfg.Clock.Now()
		due       = func() bool { return r.cfg.Clock.Now().Sub(lastSave) >= r.cfg.CheckpointInterval }
	)
	// save writes the checkpoint at unsaved; on failure the relay reads
	// again from the saved one (publishing what followed it again).
	save := func() error {
		if unsaved == nil {
			return nil
		}
		text := unsaved.String()
		if err := r.cfg.Checkpoints.Save(ctx, r.cfg.Name, text); err != nil {
			unsaved, recovered, loaded = nil, nil, false
			return fmt.Errorf("save checkpoint: %w", err)
		}
		r.update(func(s *RelayStatus) { s.Position = text })
		r.clearRecovered(ctx, recovered, log)
		unsaved, recovered, lastSave = nil, nil, r.cfg.Clock.Now()
		return nil
	}
	// outage records a failure and pauses; it returns an error when Run must
	// stop (MaxFailures reached, or ctx ended).
	outage := func(stage string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		failures++
		r.noteFailure(stage, err, failures)
		if r.cfg.MaxFailures > 0 && failures >= r.cfg.MaxFailures {
			return fmt.Errorf("%d consecutive failures: %s: %w", failures, stage, err)
		}
		log.WarnContext(ctx, "relay: outage; retrying", "stage", stage, "err", err, "failures", failures, "backoff", backoff)
		if !pause(ctx, backoff, nil) {
			return ctx.Err()
		}
		backoff = min(backoff*2, 30*r.cfg.FailureBackoff)
		return nil
	}
	healthy := func() {
		if failures > 0 {
			log.InfoContext(ctx, "relay: recovered", "after_failures", failures)
		}
		failures, backoff = 0, r.cfg.FailureBackoff
		r.noteHealthy()
	}
	r.loadPending(ctx, log)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(lastCheck) >= r.cfg.LeaderCheck {
			if err := r.leader.Check(ctx); err != nil {
				return err
			}
			lastCheck = time.Now()
		}
		if !loaded {
			pos, text, err := r.loadCheckpoint(ctx)
			if err != nil {
				if err := outage(StageCheckpoint, err); err != nil {
					return err
				}
				continue
			}
			after, loaded = pos, true
			r.update(func(s *RelayStatus) { s.Position = text })
		}
		batch, err := r.cfg.Store.ReadAll(ctx, after, r.cfg.BatchSize)
		if err != nil {
			if err := outage(StageRead, err); err != nil {
				return err
			}
			continue
		}
		if len(batch) == 0 {
			if err := save(); err != nil { // idle: save before pausing
				if err := outage(StageCheckpoint, err); err != nil {
					return err
				}
				continue
			}
			if pinger != nil && time.Since(lastPing) >= r.cfg.PingInterval {
				if err := pinger.Ping(ctx); err != nil {
					if err := outage(StagePublish, fmt.Errorf("transport unreachable: %w", err)); err != nil {
						return err
					}
					continue
				}
				lastPing = time.Now()
			}
			healthy()
			if !pause(ctx, poll, r.cfg.Wake) {
				return ctx.Err()
			}
			poll = min(poll*2, r.cfg.PollMax)
			continue
		}
		res := r.relayBatch(ctx, after, batch, log)
		switch {
		case res.err == nil:
		case errors.Is(res.err, ErrLeadershipLost):
			return res.err
		default:
			// Read again from what was saved.
			unsaved, recovered = nil, nil
			if err := outage(res.stage, res.err); err != nil {
				return err
			}
			loaded = false
			continue
		}
		if res.moved {
			unsaved, recovered = res.next, append(recovered, res.recovered...)
		}
		if res.retryIn > 0 || due() {
			if err := save(); err != nil {
				if err := outage(StageCheckpoint, err); err != nil {
					return err
				}
				continue
			}
		}
		lastCheck = time.Now() // relayBatch checked before publishing
		if res.published {
			lastPing = lastCheck // publishing answers what a ping asks
		}
		after = res.next
		healthy()
		poll = r.cfg.PollMin
		if len(batch) < r.cfg.BatchSize && res.retryIn == 0 {
			// Caught up: what comes next is a few events at a time; let
			// them gather for PollMin rather than read each on its own.
			if !pause(ctx, r.cfg.PollMin, r.cfg.Wake) {
				return ctx.Err()
			}
		}
		if res.retryIn > 0 {
			// An event failed and waits for its retry: the log waits behind
			// it, for at most Policy.MaxBackoff.
			if !pause(ctx, res.retryIn, nil) {
				return ctx.Err()
			}
		}
	}
}

func (r *Relay) loadCheckpoint(ctx context.Context) (eventstore.Position, string, error) {
	text, err := r.cfg.Checkpoints.Load(ctx, r.cfg.Name)
	if err != nil {
		return nil, "", fmt.Errorf("load checkpoint: %w", err)
	}
	if text == "" {
		return nil, "", nil
	}
	pos, err := r.cfg.Store.ParsePosition(text)
	if err != nil {
		return nil, "", fmt.Errorf("checkpoint %s: %w", r.cfg.Name, err)
	}
	return pos, text, nil
}

// pendingListBound bounds the failing events a relay looks up when it starts
// leading. A relay stops at its one failing event, so there is at most one
// per relay in the normal course; the bound only keeps a damaged table from
// costing more.
const pendingListBound = 100

// loadPending learns which of this relay's events have a recorded failure
// and are not set aside (a relay that failed on them before a restart), so
// that they are cleared once they relay. Best effort: if the store cannot
// answer, such an entry stays listed as retrying until it fails again.
func (r *Relay) loadPending(ctx context.Context, log *slog.Logger) {
	r.pending = map[string]bool{}
	items, err := r.cfg.SetAside.List(ctx, setaside.Query{Role: setaside.RoleRelay, Limit: pendingListBound})
	if err != nil {
		log.WarnContext(ctx, "relay: cannot list failing events", "err", err)
		return
	}
	for _, it := range items {
		if !it.SetAside && strings.HasPrefix(it.Item, r.cfg.Name+":") {
			r.pending[it.Item] = true
		}
	}
}

// batchResult is what relayBatch did.
type batchResult struct {
	next      eventstore.Position // where the relay got: the checkpoint to save
	moved     bool                // next is past the position the batch was read after
	recovered []string            // events whose recorded failures to clear once next is saved
	retryIn   time.Duration       // > 0: stopped at a failing event; retry it after this
	published bool                // messages went out
	stage     string              // of err
	err       error               // an outage: read again from the saved checkpoint
}

// relayBatch maps batch (read after after) to messages and publishes them;
// the caller saves the checkpoint (see CheckpointInterval). An event
// Select refuses is recorded as failed: once set aside it is skipped (the
// checkpoint moves past it); before that the batch stops at it, what
// precedes it is published, and retryIn says when to read it again.
func (r *Relay) relayBatch(ctx context.Context, after eventstore.Position, batch []eventstore.RecordedEvent, log *slog.Logger) batchResult {
	var (
		out     []Outbound
		last    = after
		lastIdx = -1
		passed  []string
		retryIn time.Duration
		failing string
	)
	for i, rec := range batch {
		item := r.itemName(rec)
		msgs, err := r.cfg.Select(rec)
		if err != nil {
			it, ferr := r.failed(ctx, rec, item, err)
			if ferr != nil {
				return batchResult{next: after, stage: StageSetAside, err: ferr}
			}
			if it.SetAside {
				delete(r.pending, item)
				r.update(func(s *RelayStatus) { s.SetAside++ })
				log.ErrorContext(ctx, "relay: event set aside; moving past it", "event_id", rec.ID, "stream", rec.StreamID,
					"version", rec.Version, "position", rec.Position.String(), "attempts", it.Attempts, "err", err)
				last, lastIdx = rec.Position, i
				continue
			}
			r.pending[item] = true
			failing = item
			retryIn = min(max(it.RetryAt.Sub(r.cfg.Clock.Now()), time.Millisecond), r.cfg.Policy.MaxBackoff)
			log.WarnContext(ctx, "relay: cannot turn an event into a message; retrying it", "event_id", rec.ID, "stream", rec.StreamID,
				"attempts", it.Attempts, "max_attempts", r.cfg.Policy.MaxAttempts, "retry_in", retryIn, "err", err)
			break
		}
		if r.pending[item] {
			passed = append(passed, item)
		}
		out = append(out, msgs...)
		last, lastIdx = rec.Position, i
	}
	r.update(func(s *RelayStatus) { s.Retrying = failing })
	if lastIdx < 0 {
		return batchResult{next: after, retryIn: retryIn} // the first event failed: nothing to save
	}
	if len(out) > 0 {
		if err := r.leader.Check(ctx); err != nil {
			return batchResult{next: after, err: err}
		}
		if err := r.cfg.Publisher.Publish(ctx, out); err != nil {
			return batchResult{next: after, stage: StagePublish, err: fmt.Errorf("publish %d messages: %w", len(out), err)}
		}
		r.published.Add(int64(len(out)))
		now := r.cfg.Clock.Now()
		r.update(func(s *RelayStatus) { s.LastPublishedAt = now })
	}
	return batchResult{next: last, moved: true, recovered: passed, retryIn: retryIn, published: len(out) > 0}
}

// clearRecovered clears the recorded failures of events that relayed after
// all, once the checkpoint past them is saved.
func (r *Relay) clearRecovered(ctx context.Context, items []string, log *slog.Logger) {
	for _, item := range items {
		if err := r.cfg.SetAside.Clear(ctx, setaside.RoleRelay, item); err != nil {
			log.WarnContext(ctx, "relay: cannot clear a recovered event's failures", "item", item, "err", err)
			continue // it stays listed as retrying; harmless
		}
		delete(r.pending, item)
	}
}

// failed records a failed Select of rec.
func (r *Relay) failed(ctx context.Context, rec eventstore.RecordedEvent, item string, cause error) (setaside.Item, error) {
	op, _ := domain.OperationIDFromStream(rec.StreamID)
	it, err := r.cfg.SetAside.Fail(ctx, setaside.Failure{
		Role: setaside.RoleRelay, Item: item, OperationID: op, Reason: ReasonRelaySelectFailed,
		Detail: fmt.Sprintf("%s@%d (%s, %s): %v", rec.StreamID, rec.Version, rec.Type, rec.Position, cause),
		At:     r.cfg.Clock.Now(),
	}, r.cfg.Policy)
	if err != nil {
		return setaside.Item{}, fmt.Errorf("record failed event %s: %w", rec.ID, err)
	}
	return it, nil
}

// pause waits d, or less if ctx ends (it then reports false) or wake fires.
func pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}
