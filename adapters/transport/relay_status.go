package transport

import (
	"fmt"
	"time"

	"opledger/eventstore/follow"
)

// Stages of a relay round, naming what an outage hit (RelayStatus.Stage).
const (
	StageLeader     = follow.StageLeader     // taking or checking the leadership
	StageCheckpoint = follow.StageCheckpoint // loading or saving the checkpoint
	StageRead       = follow.StageRead       // reading the global log
	StageSetAside   = "set-aside store"      // recording a failed event
	StagePublish    = "publish"              // handing messages to the transport (Kafka unreachable, ...)
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
	s := r.status
	r.mu.Unlock()
	f := r.follower.Status()
	s.Leader, s.Failing, s.Stage, s.Err, s.Since, s.Failures = f.Leading, f.Failing, f.Stage, f.Err, f.Since, f.Failures
	if !s.Leader {
		s.Retrying = "" // a standby backs off on nothing
	}
	s.Published = r.published.Load()
	return s
}

func (r *Relay) update(f func(*RelayStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.status)
}

// RelayLag is how far a relay's checkpoint trails the log.
type RelayLag struct {
	Position string // the checkpoint measured from
	// Events counts events after the checkpoint, up to
	// follow.DefaultLagMaxEvents; Capped says there are more.
	Events int64
	Capped bool
	// Behind is the ledger's now minus the ledger's time of the oldest
	// event not yet relayed (codec.LedgerTime); 0 when caught up.
	Behind time.Duration
}
