package projections

import (
	"errors"
	"fmt"
	"time"

	"opledger/domain"
)

// Reasons an event is skipped (skipped_events.reason, and the set-aside
// item's reason for role projector).
const (
	// ReasonEventUndecodable: the event's data or metadata cannot be decoded.
	ReasonEventUndecodable = "event.undecodable"
	// ReasonEventUnfoldable: the event decodes but cannot follow what the
	// read models hold (ErrCorruptLog).
	ReasonEventUnfoldable = "event.unfoldable"
	// ReasonFollowsSkipped: the event cannot be folded, and an earlier event
	// of its operation was skipped: it is skipped at once, without retries,
	// since what it follows is missing.
	ReasonFollowsSkipped = "event.follows-skipped"
)

// maxSkipDetail bounds the detail kept per skipped event.
const maxSkipDetail = domain.MaxTextLength

// skipReason is why an event is skipped.
type skipReason struct{ reason, detail string }

// skipSet holds the events a batch skips, by event id: those set aside.
type skipSet map[string]skipReason

// eventError is an event a batch cannot fold: an item failure (the event's
// own), never an outage. It wraps the cause (ErrCorruptLog).
type eventError struct {
	index  int // in the batch
	id     string
	op     string // "" for the evidence stream
	reason string // ReasonEventUndecodable or ReasonEventUnfoldable
	err    error
}

func newEventError(index int, d decodedEvent, err error) *eventError {
	reason := ReasonEventUnfoldable
	if d.err != nil {
		reason = ReasonEventUndecodable
	}
	return &eventError{index: index, id: d.rec.ID, op: d.op, reason: reason, err: err}
}

func (e *eventError) Error() string { return fmt.Sprintf("event %s: %s: %v", e.id, e.reason, e.err) }
func (e *eventError) Unwrap() error { return e.err }

// asEventError finds the failing event in err, if that is what failed.
func asEventError(err error) (*eventError, bool) {
	var ee *eventError
	ok := errors.As(err, &ee)
	return ee, ok
}

// skip reads past d without folding it: the event is listed in
// skipped_events and its operation is marked incomplete (its row, when it
// has one, and every later event of it that cannot be folded is skipped
// too). Skipping is idempotent, like folding: a skipped event read again is
// listed once.
func (m *batchModel) skip(d decodedEvent, reason, detail string, now time.Time) {
	detail, _ = domain.EvidenceText(detail, maxSkipDetail)
	m.skipped = append(m.skipped, &skippedRow{
		EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
		EventType: d.rec.Type, OperationID: d.op, Reason: reason, Detail: detail, SkippedAt: now,
	})
	if d.op == "" {
		return
	}
	m.incomplete[d.op] = true
	if o := m.ops[d.op]; o != nil && !o.ProjectionIncomplete {
		o.ProjectionIncomplete = true
		touch(&o.change)
	}
}
