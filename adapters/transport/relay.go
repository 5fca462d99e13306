package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// Names of the relays opledger runs, which are also their checkpoints'
// names. Never rename one: a renamed relay starts from the beginning of the
// log (harmless, since message ids are stable, but slow).
const (
	RelayRefundRequests  = "refund-requests"  // SelectRefundRequests
	RelaySecuritySignals = "security-signals" // SelectSecuritySignals
	RelayOperationFeed   = "operation-feed"   // SelectOperationFeed
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
// most events); ctx bounds what it reads besides the event (the operation
// feed reads an operation's first event). An error means the event cannot
// be turned into a message (undecodable, an unexpected shape, a read that
// failed): the relay retries it a bounded number of times
// (RelayConfig.Policy) and then sets it aside and moves past it.
type Selector func(ctx context.Context, rec eventstore.RecordedEvent) ([]Outbound, error)

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
	// Regressions, when set, is told when the log went back under the
	// relay's checkpoint (a failover lost the last commits); the relay
	// rewinds to what the log still holds either way (follow.Rewinder).
	Regressions eventstore.RegressionObserver
	// SetAside keeps the events the relay could not turn into messages
	// (role setaside.RoleRelay, item "<relay name>:<event id>"). Default: an
	// in-memory store, whose counts a restart forgets (serve passes
	// pgsetaside.New).
	SetAside setaside.Store
	// Policy bounds the retries of such an event (default
	// DefaultRelayPolicy).
	Policy setaside.Policy
	// Leader is the lock the relay publishes under (default: none, the relay
	// always leads): pgstate.NewLeader on PostgreSQL.
	Leader follow.Leadership
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
// recognisable. Only the holder of the Leader lock publishes. The loop, the
// leadership, the pauses and the back-off are a follow.Follower's; the relay
// says what one batch does (relay_batch.go).
type Relay struct {
	cfg       RelayConfig
	follower  *follow.Follower[struct{}]
	published atomic.Int64

	mu     sync.Mutex
	status RelayStatus // the relay's own fields; the follower keeps the rest
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
	cfg.PingInterval = cmp.Or(cfg.PingInterval, 5*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	cfg.CheckpointInterval = cmp.Or(cfg.CheckpointInterval, time.Second)
	cfg.FailureBackoff = cmp.Or(cfg.FailureBackoff, 100*time.Millisecond)
	var errs []error
	if cfg.PingInterval <= 0 || cfg.CheckpointInterval <= 0 {
		errs = append(errs, errors.New("PingInterval and CheckpointInterval must be positive"))
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
	r := &Relay{cfg: cfg, status: RelayStatus{Name: cfg.Name}}
	h := &relayHandler{r: r, log: cfg.Logger.With("relay", cfg.Name)}
	h.pinger, _ = cfg.Publisher.(Pinger)
	f, err := follow.New(follow.Config[struct{}]{
		Name: "relay " + cfg.Name, Store: cfg.Store, Handler: h, Leader: cfg.Leader,
		LeaderRetry: cfg.LeaderRetry, LeaderCheck: cfg.LeaderCheck, BatchSize: cfg.BatchSize,
		PollMin: cfg.PollMin, PollMax: cfg.PollMax, Wake: cfg.Wake,
		FailureBackoff: cfg.FailureBackoff, MaxFailureBackoff: 30 * cfg.FailureBackoff, MaxFailures: cfg.MaxFailures,
		Now: cfg.Clock.Now, Logger: h.log, Regressions: cfg.Regressions, RegressionCache: domain.CacheRelayCheckpoint,
	})
	if err != nil {
		return nil, fmt.Errorf("transport: relay config: %w", err)
	}
	r.follower = f
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
func (r *Relay) Run(ctx context.Context) error { return r.follower.Run(ctx) }

// Lag measures how far the relay's saved checkpoint trails the log: the
// events after it (at most follow.DefaultLagMaxEvents) and the age of the
// first, on the ledger's clock (the relay's Clock against the events'
// recorded_at). It reads the shared checkpoint, so a standby reports the
// leader's lag. Each call reads the checkpoint and, unless the store shows
// the relay caught up, up to that many events.
func (r *Relay) Lag(ctx context.Context) (RelayLag, error) {
	text, err := r.cfg.Checkpoints.Load(ctx, r.cfg.Name)
	if err != nil {
		return RelayLag{}, fmt.Errorf("relay %s lag: %w", r.cfg.Name, err)
	}
	var after eventstore.Position
	if text != "" {
		if after, err = r.cfg.Store.ParsePosition(text); err != nil {
			return RelayLag{}, fmt.Errorf("relay %s lag: checkpoint: %w", r.cfg.Name, err)
		}
	}
	lag, err := follow.MeasureLag(ctx, r.cfg.Store, after, follow.LagOptions{Now: r.cfg.Clock.Now(), EventTime: codec.LedgerTime})
	if err != nil {
		return RelayLag{}, fmt.Errorf("relay %s %w", r.cfg.Name, err)
	}
	return RelayLag{Position: text, Events: lag.Events, Capped: lag.Capped, Behind: lag.Behind}, nil
}
