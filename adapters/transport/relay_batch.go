package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// relayHandler is what a relay does with the log (follow.Handler): it maps
// each batch to messages, publishes them, and saves its checkpoint once per
// CheckpointInterval and whenever the log is idle. Only the follower's
// goroutine calls it.
type relayHandler struct {
	r      *Relay
	log    *slog.Logger
	pinger Pinger // the Publisher, if it is one
	// pending holds this relay's events with a recorded failure that are
	// not set aside: cleared from the store once they relay.
	pending map[string]bool
	// unsaved is how far the relay got past its saved checkpoint (nil:
	// nowhere), with the recovered events to clear once it is saved.
	unsaved   eventstore.Position
	recovered []string
	lastSave  time.Time // by the relay's Clock
	lastPing  time.Time // real time; zero: ping when first idle
}

// errRetrying is the cause of the Retry a relay returns when it stops at a
// failing event; the event's own error is in the set-aside store.
var errRetrying = errors.New("relay: an event failed; retrying it")

// Resume implements follow.Handler: it loads the saved checkpoint and the
// failing events recorded before (loadPending). What followed the saved
// checkpoint is read, and published, again.
func (h *relayHandler) Resume(ctx context.Context) (eventstore.Position, error) {
	r := h.r
	h.unsaved, h.recovered = nil, nil
	if h.lastSave.IsZero() {
		h.lastSave = r.cfg.Clock.Now()
	}
	h.loadPending(ctx)
	text, err := r.cfg.Checkpoints.Load(ctx, r.cfg.Name)
	if err != nil {
		return nil, follow.AtStage(StageCheckpoint, fmt.Errorf("load checkpoint: %w", err))
	}
	var pos eventstore.Position
	if text != "" {
		if pos, err = r.cfg.Store.ParsePosition(text); err != nil {
			return nil, follow.AtStage(StageCheckpoint, fmt.Errorf("checkpoint %s: %w", r.cfg.Name, err))
		}
	}
	r.update(func(s *RelayStatus) { s.Position = text })
	return pos, nil
}

// Handle implements follow.Handler: it relays b, then saves the checkpoint
// when it is due or when the relay stopped at a failing event.
func (h *relayHandler) Handle(ctx context.Context, b follow.Batch[struct{}]) (eventstore.Position, error) {
	res := h.relayBatch(ctx, b)
	if res.err != nil {
		if errors.Is(res.err, follow.ErrLeadershipLost) {
			return nil, res.err
		}
		return nil, follow.AtStage(res.stage, res.err) // the follower resumes from the saved checkpoint
	}
	if res.moved {
		h.unsaved, h.recovered = res.next, append(h.recovered, res.recovered...)
	}
	if res.retryIn > 0 || h.r.cfg.Clock.Now().Sub(h.lastSave) >= h.r.cfg.CheckpointInterval {
		if err := h.save(ctx); err != nil {
			return nil, err
		}
	}
	if res.published {
		h.lastPing = time.Now() // publishing answers what a ping asks
	}
	if res.retryIn > 0 {
		// The log waits behind the failing event, for at most
		// Policy.MaxBackoff.
		return res.next, follow.Retry(res.retryIn, errRetrying)
	}
	return res.next, nil
}

// Idle implements follow.Handler: an idle log is when the relay saves what
// it put off, and pings a transport it has not reached for PingInterval.
func (h *relayHandler) Idle(ctx context.Context) error {
	if err := h.save(ctx); err != nil {
		return err
	}
	if h.pinger != nil && time.Since(h.lastPing) >= h.r.cfg.PingInterval {
		if err := h.pinger.Ping(ctx); err != nil {
			return follow.AtStage(StagePublish, fmt.Errorf("transport unreachable: %w", err))
		}
		h.lastPing = time.Now()
	}
	return nil
}

// Rewind implements follow.Rewinder: the log went back under the
// checkpoint (a failover lost the last commits), so it is saved at to
// ("" for the start of the log) and what follows it is published again,
// under the same message ids.
func (h *relayHandler) Rewind(ctx context.Context, to eventstore.Position) error {
	text := ""
	if to != nil {
		text = to.String()
	}
	if err := h.r.cfg.Checkpoints.Save(ctx, h.r.cfg.Name, text); err != nil {
		return follow.AtStage(StageCheckpoint, fmt.Errorf("rewind checkpoint: %w", err))
	}
	h.unsaved, h.recovered = nil, nil
	return nil
}

// save writes the checkpoint at unsaved; on failure the follower resumes
// from the saved one (publishing what followed it again).
func (h *relayHandler) save(ctx context.Context) error {
	if h.unsaved == nil {
		return nil
	}
	r := h.r
	text := h.unsaved.String()
	if err := r.cfg.Checkpoints.Save(ctx, r.cfg.Name, text); err != nil {
		return follow.AtStage(StageCheckpoint, fmt.Errorf("save checkpoint: %w", err))
	}
	r.update(func(s *RelayStatus) { s.Position = text })
	h.clearRecovered(ctx, h.recovered)
	h.unsaved, h.recovered, h.lastSave = nil, nil, r.cfg.Clock.Now()
	return nil
}

// pendingListBound bounds the failing events a relay looks up when it
// resumes. A relay stops at its one failing event, so there is at most one
// per relay in the normal course; the bound only keeps a damaged table from
// costing more.
const pendingListBound = 100

// loadPending learns which of this relay's events have a recorded failure
// and are not set aside (a relay that failed on them before a restart), so
// that they are cleared once they relay. Best effort: if the store cannot
// answer, such an entry stays listed as retrying until it fails again.
func (h *relayHandler) loadPending(ctx context.Context) {
	r := h.r
	h.pending = map[string]bool{}
	items, err := r.cfg.SetAside.List(ctx, setaside.Query{Role: setaside.RoleRelay, Limit: pendingListBound})
	if err != nil {
		h.log.WarnContext(ctx, "relay: cannot list failing events", "err", err)
		return
	}
	for _, it := range items {
		if !it.SetAside && strings.HasPrefix(it.Item, r.cfg.Name+":") {
			h.pending[it.Item] = true
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

// relayBatch maps b to messages and publishes them; the caller saves the
// checkpoint (see CheckpointInterval). An event Select refuses is recorded
// as failed: once set aside it is skipped (the checkpoint moves past it);
// before that the batch stops at it, what precedes it is published, and
// retryIn says when to read it again.
func (h *relayHandler) relayBatch(ctx context.Context, b follow.Batch[struct{}]) batchResult {
	r := h.r
	var (
		out     []Outbound
		last    = b.After
		lastIdx = -1
		passed  []string
		retryIn time.Duration
		failing string
	)
	for i, rec := range b.Events {
		item := r.itemName(rec)
		msgs, err := r.cfg.Select(ctx, rec)
		if err != nil {
			it, ferr := h.failed(ctx, rec, item, err)
			if ferr != nil {
				return batchResult{next: b.After, stage: StageSetAside, err: ferr}
			}
			if it.SetAside {
				delete(h.pending, item)
				r.update(func(s *RelayStatus) { s.SetAside++ })
				h.log.ErrorContext(ctx, "relay: event set aside; moving past it", "event_id", rec.ID, "stream", rec.StreamID,
					"version", rec.Version, "position", rec.Position.String(), "attempts", it.Attempts, "err", err)
				last, lastIdx = rec.Position, i
				continue
			}
			h.pending[item] = true
			failing = item
			retryIn = min(max(it.RetryAt.Sub(r.cfg.Clock.Now()), time.Millisecond), r.cfg.Policy.MaxBackoff)
			h.log.WarnContext(ctx, "relay: cannot turn an event into a message; retrying it", "event_id", rec.ID, "stream", rec.StreamID,
				"attempts", it.Attempts, "max_attempts", r.cfg.Policy.MaxAttempts, "retry_in", retryIn, "err", err)
			break
		}
		if h.pending[item] {
			passed = append(passed, item)
		}
		out = append(out, msgs...)
		last, lastIdx = rec.Position, i
	}
	r.update(func(s *RelayStatus) { s.Retrying = failing })
	if lastIdx < 0 {
		return batchResult{next: b.After, retryIn: retryIn} // the first event failed: nothing to save
	}
	if len(out) > 0 {
		if err := h.publish(ctx, b, out); err != nil {
			return batchResult{next: b.After, stage: StagePublish, err: err}
		}
	}
	return batchResult{next: last, moved: true, recovered: passed, retryIn: retryIn, published: len(out) > 0}
}

// publish hands out to the transport, checking the leadership right
// before.
func (h *relayHandler) publish(ctx context.Context, b follow.Batch[struct{}], out []Outbound) error {
	r := h.r
	if err := b.Lead(ctx); err != nil {
		return err
	}
	if err := r.cfg.Publisher.Publish(ctx, out); err != nil {
		return fmt.Errorf("publish %d messages: %w", len(out), err)
	}
	r.published.Add(int64(len(out)))
	now := r.cfg.Clock.Now()
	r.update(func(s *RelayStatus) { s.LastPublishedAt = now })
	return nil
}

// clearRecovered clears the recorded failures of events that relayed after
// all, once the checkpoint past them is saved.
func (h *relayHandler) clearRecovered(ctx context.Context, items []string) {
	for _, item := range items {
		if err := h.r.cfg.SetAside.Clear(ctx, setaside.RoleRelay, item); err != nil {
			h.log.WarnContext(ctx, "relay: cannot clear a recovered event's failures", "item", item, "err", err)
			continue // it stays listed as retrying; harmless
		}
		delete(h.pending, item)
	}
}

// failed records a failed Select of rec.
func (h *relayHandler) failed(ctx context.Context, rec eventstore.RecordedEvent, item string, cause error) (setaside.Item, error) {
	r := h.r
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

// itemName names an event of this relay in the set-aside store.
func (r *Relay) itemName(rec eventstore.RecordedEvent) string {
	return r.cfg.Name + ":" + cmp.Or(rec.ID, rec.Position.String())
}
