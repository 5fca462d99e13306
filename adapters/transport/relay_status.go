package transport

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"opledger/eventstore"
)

// Stages of a relay round, naming what an outage hit (RelayStatus.Stage).
const (
	StageLeader     = "leader lock"     // taking or checking the leadership
	StageCheckpoint = "checkpoint"      // loading or saving the checkpoint
	StageRead       = "read log"        // reading the global log
	StageSetAside   = "set-aside store" // recording a failed event
	StagePublish    = "publish"         // handing messages to the transport (Kafka unreachable, ...)
)

// RelayStatus is what a relay is doing, for /readyz, /metrics and tests.
type RelayStatus struct {
	Name string
	// Leader is true while the relay holds its leadership (always, for a
	// relay without one); a standby waits to take over and is healthy.
	Leader bool
	// Position is the checkpoint this relay last loaded or saved ("" before
	// the first load, and at the start of the log).
	Position string
	// Published counts messages this relay published since it started
	// (copies after a failed checkpoint included); LastPublishedAt is when
	// it last published (zero if never).
	Published       int64
	LastPublishedAt time.Time
	// SetAside counts events this relay set aside since it started (each is
	// kept in the set-aside store with its reason).
	SetAside int64
	// Retrying names the event the relay is backing off on after it failed
	// to turn it into a message ("<relay>:<event id>"), "" when none; the
	// log waits behind it until it succeeds or is set aside.
	Retrying string
	// Failing is true while the relay's latest attempt hit an outage: Stage
	// says where (StagePublish: the transport cannot be reached), Err what,
	// Since when the current streak of failures began, Failures how many in
	// a row. A round that relays a batch or finds the log caught up ends
	// the streak.
	Failing  bool
	Stage    string
	Err      string
	Since    time.Time
	Failures int
}

// Problem returns nil when the relay is healthy (leading and not failing,
// or a standby) and otherwise an error saying what fails since when, e.g.
// "relay refund-requests: publish failing since 2026-11-26T14:02:10Z (7 in
// a row): publish 3 messages: dial tcp 127.0.0.1:9: connection refused".
// /readyz reports it; a caller may allow a grace period by looking at Since.
func (s RelayStatus) Problem() error {
	if !s.Failing {
		return nil
	}
	return fmt.Errorf("relay %s: %s failing since %s (%d in a row): %s",
		s.Name, s.Stage, s.Since.UTC().Format(time.RFC3339), s.Failures, s.Err)
}

// Status returns a snapshot of the relay's status. Safe for concurrent use.
func (r *Relay) Status() RelayStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.status
	s.Published = r.published.Load()
	return s
}

func (r *Relay) update(f func(*RelayStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.status)
}

// noteFailure records an outage at stage.
func (r *Relay) noteFailure(stage string, err error, failures int) {
	now := r.cfg.Clock.Now()
	r.update(func(s *RelayStatus) {
		if !s.Failing {
			s.Since = now
		}
		s.Failing, s.Stage, s.Err, s.Failures = true, stage, err.Error(), failures
	})
}

// noteHealthy ends a streak of failures.
func (r *Relay) noteHealthy() {
	r.update(func(s *RelayStatus) { s.Failing, s.Stage, s.Err, s.Since, s.Failures = false, "", "", time.Time{}, 0 })
}

// RelayLag is how far a relay's checkpoint trails the log.
type RelayLag struct {
	Position string // the checkpoint measured from
	// Events counts events after the checkpoint, up to MaxLagEvents;
	// Capped says there are more.
	Events int64
	Capped bool
	// Behind is now minus the store's time of the oldest event not yet
	// relayed; 0 when caught up.
	Behind time.Duration
}

// MaxLagEvents bounds how many events Lag counts (it reads them through the
// store, so counting costs what reading costs).
const MaxLagEvents = 10_000

// lagPage is the read size Lag counts with.
const lagPage = 1000

// header is what a store that knows its head offers (the Postgres store):
// Lag then skips reading when the relay is caught up.
type header interface {
	Head(ctx context.Context) (eventstore.Position, error)
}

// Lag measures how far the relay's saved checkpoint trails the log: the
// events after it (at most MaxLagEvents) and the age of the first. It reads
// the shared checkpoint, so a standby reports the leader's lag. Each call
// reads the checkpoint and, unless the store shows the relay caught up,
// up to MaxLagEvents events.
func (r *Relay) Lag(ctx context.Context) (RelayLag, error) {
	text, err := r.cfg.Checkpoints.Load(ctx, r.cfg.Name)
	if err != nil {
		return RelayLag{}, fmt.Errorf("relay %s lag: %w", r.cfg.Name, err)
	}
	lag := RelayLag{Position: text}
	var after eventstore.Position
	if text != "" {
		if after, err = r.cfg.Store.ParsePosition(text); err != nil {
			return RelayLag{}, fmt.Errorf("relay %s lag: checkpoint: %w", r.cfg.Name, err)
		}
	}
	if h, ok := r.cfg.Store.(header); ok {
		head, err := h.Head(ctx)
		if err != nil {
			return RelayLag{}, fmt.Errorf("relay %s lag: head: %w", r.cfg.Name, err)
		}
		if head == nil || head.Compare(after) <= 0 {
			return lag, nil
		}
	}
	now := r.cfg.Clock.Now()
	for lag.Events < MaxLagEvents { // bounded: at most MaxLagEvents/lagPage reads
		want := int(min(lagPage, MaxLagEvents-lag.Events))
		page, err := r.cfg.Store.ReadAll(ctx, after, want)
		if err != nil {
			return RelayLag{}, fmt.Errorf("relay %s lag: read log: %w", r.cfg.Name, err)
		}
		if len(page) > 0 && lag.Events == 0 {
			lag.Behind = max(0, now.Sub(page[0].RecordedAt))
		}
		lag.Events += int64(len(page))
		if len(page) < want {
			return lag, nil
		}
		after = page[len(page)-1].Position
	}
	more, err := r.cfg.Store.ReadAll(ctx, after, 1)
	if err != nil {
		return RelayLag{}, fmt.Errorf("relay %s lag: read log: %w", r.cfg.Name, err)
	}
	lag.Capped = len(more) > 0
	return lag, nil
}

// itemName names an event of this relay in the set-aside store.
func (r *Relay) itemName(rec eventstore.RecordedEvent) string {
	return r.cfg.Name + ":" + cmp.Or(rec.ID, rec.Position.String())
}
