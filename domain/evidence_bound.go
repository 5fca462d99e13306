package domain

import (
	"fmt"
	"slices"
	"time"
)

// The evidence bound (invariant 14). Hostile callers can present and write
// as fast as their rate limit lets them; what the ledger records of it must
// not grow with their volume. Refusals are counted per key — a capability
// presented, an execution written for (apart: writes that presented its
// holder's secret), an operation named — in windows of the ledger's clock:
// the first PerKey refusals of a key in a window, and at most PerStream of a
// whole evidence stream, are recorded one by one, every member kept; every
// further refusal of the window is counted into a RefusalsSummarized. So an
// evidence stream grows by at most PerStream events one by one per window,
// plus the summaries, whose number the command handler bounds per key and
// window (ledger.Config.SummaryEvery), whatever the number of callers.
//
// Which refusals are recorded one by one is decided from the log (the
// evidence stream as EvidenceLog folds it), by the ledger's clock, so every
// handler in every process decides the same, and appends of one-by-one
// evidence are fenced by the evidence stream's version: the bound is exact.

// EvidenceScope says what a bound is kept per.
type EvidenceScope string

const (
	// ScopeCapability: presentations of one capability (refused or
	// duplicate), whoever presents it.
	ScopeCapability EvidenceScope = "capability"
	// ScopeExecution: refused writes for one execution that did not
	// present its holder's secret (missing, wrong, or none to compare).
	ScopeExecution EvidenceScope = "execution"
	// ScopeHolder: refused writes for one execution that presented its
	// holder's secret (a stale epoch, a malformed field): kept apart, so
	// that no other caller's refusals can make the holder's wait on a
	// summary.
	ScopeHolder EvidenceScope = "holder"
	// ScopeOperation: presentations naming one operation with no
	// capability read (a malformed delivery), and, in the unattributed
	// stream, presentations naming one operation that does not exist.
	ScopeOperation EvidenceScope = "operation"
	// ScopeStream: refusals past the whole stream's bound in a window.
	ScopeStream EvidenceScope = "stream"
)

// Valid reports whether s is a scope this build knows.
func (s EvidenceScope) Valid() bool {
	switch s {
	case ScopeCapability, ScopeExecution, ScopeHolder, ScopeOperation, ScopeStream:
		return true
	}
	return false
}

// EvidenceKey is what one bound is kept for.
type EvidenceKey struct {
	Scope EvidenceScope
	ID    string // the capability, execution or operation id; "" for ScopeStream
}

func (k EvidenceKey) String() string {
	if k.ID == "" {
		return string(k.Scope)
	}
	return string(k.Scope) + " " + k.ID
}

// StreamKey is the key of refusals past a stream's bound.
var StreamKey = EvidenceKey{Scope: ScopeStream}

// EvidenceBound is the bound on what an evidence stream records one by one.
type EvidenceBound struct {
	// Window is the length of a window of the ledger's clock (windows
	// start at multiples of it since the zero time: hours, for an hour).
	Window time.Duration
	// PerKey refusals of one key are recorded one by one per window.
	PerKey int
	// PerStream refusals of one evidence stream are recorded one by one per
	// window, whatever their keys.
	PerStream int
}

// DefaultEvidenceBound: 16 refusals per key and 256 per evidence stream are
// recorded one by one per hour. Sixteen shows a pattern with every field (a
// lapsed holder's late writes, a consumer's redeliveries after a rebalance,
// the first probes of a replay) and is more than an honest caller leaves in
// an hour; past it, each refusal adds a count, not an event. The stream's
// bound keeps a caller who owns many capabilities, or names many unknown
// operations, to the same order.
var DefaultEvidenceBound = EvidenceBound{Window: time.Hour, PerKey: 16, PerStream: 256}

// Check refuses a bound that cannot be kept.
func (b EvidenceBound) Check() error {
	if b.Window < time.Second || b.PerKey < 1 || b.PerStream < b.PerKey {
		return fmt.Errorf("evidence bound: window %s (at least 1s), per key %d (at least 1), per stream %d (at least per key)", b.Window, b.PerKey, b.PerStream)
	}
	return nil
}

// WindowOf is the start of the window t falls in.
func (b EvidenceBound) WindowOf(t time.Time) time.Time { return t.UTC().Truncate(b.Window) }

// EvidenceKeyOf returns the key and time of a refusal recorded one by one
// (PresentationRejected, DeliveryDuplicated, WriteRefused). unattributed:
// the event is in an unattributed stream, where presentations are kept per
// operation named. ok is false for any other event.
func EvidenceKeyOf(e Event, unattributed bool) (key EvidenceKey, at time.Time, ok bool) {
	switch ev := e.(type) {
	case PresentationRejected:
		switch {
		case unattributed:
			return EvidenceKey{ScopeOperation, string(ev.OperationID)}, ev.RejectedAt, true
		case ev.CapabilityID != "":
			return EvidenceKey{ScopeCapability, string(ev.CapabilityID)}, ev.RejectedAt, true
		}
		return EvidenceKey{ScopeOperation, string(ev.OperationID)}, ev.RejectedAt, true
	case DeliveryDuplicated:
		if ev.CapabilityID != "" {
			return EvidenceKey{ScopeCapability, string(ev.CapabilityID)}, ev.SeenAt, true
		}
		return EvidenceKey{ScopeOperation, ""}, ev.SeenAt, true
	case WriteRefused:
		if ev.SecretCheck == SecretHeld {
			return EvidenceKey{ScopeHolder, string(ev.ExecutionID)}, ev.RefusedAt, true
		}
		return EvidenceKey{ScopeExecution, string(ev.ExecutionID)}, ev.RefusedAt, true
	}
	return EvidenceKey{}, time.Time{}, false
}

// evidenceWindows is how many of the latest windows an EvidenceLog keeps
// counts for: the current one and the two before it, so that a summary
// recorded shortly after its window ended can still be checked against it.
const evidenceWindows = 3

// EvidenceLog is what the ledger knows of one evidence stream in order to
// bound it: how many refusals of each key were recorded one by one in the
// latest windows. It is folded from the stream (Evolve) by the command
// handler and, the same way, by audit verify. Its size is bounded by the
// windows kept and the stream's bound per window.
type EvidenceLog struct {
	Stream       string
	Unattributed bool
	// Version is the stream version folded (-1: no events).
	Version int64
	bound   EvidenceBound
	windows []evidenceWindow // oldest first, at most evidenceWindows
}

type evidenceWindow struct {
	start  time.Time
	perKey map[EvidenceKey]int
	total  int
}

// NewEvidenceLog returns the log of an evidence stream that holds no events.
func NewEvidenceLog(stream string, b EvidenceBound) *EvidenceLog {
	return &EvidenceLog{Stream: stream, Unattributed: IsUnattributedStream(stream), Version: -1, bound: b}
}

// Bound is the bound the log is kept under.
func (l *EvidenceLog) Bound() EvidenceBound { return l.bound }

// Evolve folds one event of the stream. A refusal recorded one by one
// counts toward its key and its stream in the window its own time falls in
// (see target for a time behind the windows kept). Summaries count nothing
// toward the bound, nor does a lost effect of an operation that is gone
// (LostEffectEscalated, in an unattributed stream only: the reconciler's
// or a worker's escalation, never a caller's). Any other event is refused:
// an evidence stream holds evidence only.
func (l *EvidenceLog) Evolve(e Event) error {
	switch e.(type) {
	case RefusalsSummarized:
		return nil
	case LostEffectEscalated:
		if l.Unattributed {
			return nil
		}
	}
	key, at, ok := EvidenceKeyOf(e, l.Unattributed)
	if !ok {
		return fmt.Errorf("evolve evidence: %s has no place in evidence stream %s", e.EventType(), l.Stream)
	}
	i, fresh := l.target(at)
	if fresh {
		l.windows = append(l.windows, evidenceWindow{start: l.bound.WindowOf(at), perKey: map[EvidenceKey]int{}})
		if len(l.windows) > evidenceWindows {
			l.windows = slices.Delete(l.windows, 0, len(l.windows)-evidenceWindows)
		}
		i = len(l.windows) - 1
	}
	w := &l.windows[i]
	w.perKey[key]++
	w.total++
	return nil
}

// target returns the kept window a refusal at t counts in, or fresh when
// its window is newer than every kept one (a window to open). A time whose
// window is older than the newest kept and not kept itself (a clock behind
// another instance's, a batch recorded late) counts in the latest kept
// window that began before it, else in the oldest kept: a late refusal can
// never reopen a window's bound.
func (l *EvidenceLog) target(t time.Time) (i int, fresh bool) {
	start := l.bound.WindowOf(t)
	n := len(l.windows)
	if n == 0 || start.After(l.windows[n-1].start) {
		return 0, true
	}
	for i := n - 1; i >= 0; i-- {
		if !l.windows[i].start.After(start) {
			return i, false
		}
	}
	return 0, false
}

// Recorded returns how many refusals of key, and of the whole stream, were
// recorded one by one in the window starting at start; kept is false when
// that window is not kept (older than the windows kept, or not met yet).
func (l *EvidenceLog) Recorded(key EvidenceKey, start time.Time) (perKey, total int, kept bool) {
	for i := range l.windows {
		if w := &l.windows[i]; w.start.Equal(start) {
			return w.perKey[key], w.total, true
		}
	}
	return 0, 0, false
}

// PastBound reports whether refusals of key in the window starting at
// start are past the bound, as a summary of them requires: the stream's
// bound for StreamKey, the key's own for any other. kept is false when
// that window is not kept (past is then false too).
func (l *EvidenceLog) PastBound(key EvidenceKey, start time.Time) (past, kept bool) {
	perKey, total, kept := l.Recorded(key, start)
	switch {
	case !kept:
		return false, false
	case key.Scope == ScopeStream:
		return total >= l.bound.PerStream, true
	}
	return perKey >= l.bound.PerKey, true
}

// Admit decides how a refusal of key at now is recorded: one by one (true),
// or counted into a summary of the key it returns (the key itself, or
// StreamKey once the stream's bound is reached). window is the start of the
// window the refusal counts in (as Evolve would count it). Deciding by the
// window Evolve counts in keeps every window of the folded stream within
// the bound, whatever the clocks of the handlers that appended.
func (l *EvidenceLog) Admit(key EvidenceKey, now time.Time) (oneByOne bool, summaryKey EvidenceKey, window time.Time) {
	i, fresh := l.target(now)
	if fresh {
		return true, key, l.bound.WindowOf(now)
	}
	w := &l.windows[i]
	switch {
	case w.total >= l.bound.PerStream:
		return false, StreamKey, w.start
	case w.perKey[key] >= l.bound.PerKey:
		return false, key, w.start
	}
	return true, key, w.start
}

// Clone returns a copy that shares nothing with l.
func (l *EvidenceLog) Clone() *EvidenceLog {
	c := *l
	c.windows = make([]evidenceWindow, len(l.windows))
	for i, w := range l.windows {
		c.windows[i] = evidenceWindow{start: w.start, total: w.total, perKey: make(map[EvidenceKey]int, len(w.perKey))}
		for k, n := range w.perKey {
			c.windows[i].perKey[k] = n
		}
	}
	return &c
}
