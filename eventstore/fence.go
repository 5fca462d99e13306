package eventstore

import (
	"errors"
	"fmt"
)

// Fence is a condition an append places on another stream than its own:
// that stream holds event EventID at version Version. An append decided on
// another stream's state (evidence kept beside an operation's stream,
// decided on the operation's state) carries the fence of the event it
// decided on, so that it is refused once that event is gone — a failover
// to a standby that had not received it — instead of recording a decision
// on a history the log no longer holds. Appends to the fenced stream never
// break a fence (events are only added), so a fence costs its stream's
// writers nothing.
//
// A backend checks the fence and writes the append atomically (memory,
// PostgreSQL: in one transaction), or as close as it can (KurrentDB reads
// the fence just before the append: see that package).
type Fence struct {
	Stream  string
	Version int64
	EventID string
}

func (f Fence) String() string {
	return fmt.Sprintf("%s@%d(%s)", f.Stream, f.Version, f.EventID)
}

// ErrFenceGone is matched (errors.Is) by a *FenceError.
var ErrFenceGone = errors.New("fence gone")

// FenceError refuses an append whose fence did not hold: the fenced stream
// does not hold the fence's event at its version. Nothing was written.
// errors.Is matches both ErrFenceGone and ErrWrongExpectedVersion (the
// append was decided on a state that is not the log's).
type FenceError struct {
	Stream string // the append's stream
	Fence  Fence
}

func (e *FenceError) Error() string {
	return fmt.Sprintf("append %s: fence gone: %s does not hold event %s at version %d", e.Stream, e.Fence.Stream, e.Fence.EventID, e.Fence.Version)
}

// Is makes errors.Is(err, ErrFenceGone) and errors.Is(err,
// ErrWrongExpectedVersion) true.
func (e *FenceError) Is(target error) bool {
	return target == ErrFenceGone || target == ErrWrongExpectedVersion
}

// Holds reports whether events, the fenced stream's events read from
// f.Version (the first at most), hold the fence.
func (f Fence) Holds(events []RecordedEvent) bool {
	return len(events) > 0 && events[0].Version == f.Version && events[0].ID == f.EventID
}
