package eventstore

import (
	"errors"
	"fmt"
)

// ErrWrongExpectedVersion is matched (errors.Is) by a *WrongExpectedVersionError:
// the stream was not at the version the append was decided on.
var ErrWrongExpectedVersion = errors.New("wrong expected version")

// ErrUnavailable means the store could not be reached or the outcome of a call
// could not be established. Nothing may be assumed about the store's state.
var ErrUnavailable = errors.New("event store unavailable")

// ErrInvalidAppend is returned for an append the store refuses to attempt:
// no events, too many, an empty stream name or a malformed event.
var ErrInvalidAppend = errors.New("invalid append")

// ErrInvalidPosition is returned by ParsePosition for text that is not a
// position of this backend.
var ErrInvalidPosition = errors.New("invalid position")

// WrongExpectedVersionError carries the stream's actual version.
type WrongExpectedVersionError struct {
	Stream   string
	Expected ExpectedVersion
	Actual   int64 // NoStreamVersion when the stream holds no events
}

func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("append %s: wrong expected version: expected %s, actual %d", e.Stream, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrWrongExpectedVersion) true.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }

// Unavailable wraps cause so that errors.Is(err, ErrUnavailable) holds while
// the cause stays visible in the message and to errors.As.
func Unavailable(op string, cause error) error {
	return &unavailableError{op: op, cause: cause}
}

type unavailableError struct {
	op    string
	cause error
}

func (e *unavailableError) Error() string {
	return fmt.Sprintf("%s: %v: %v", e.op, ErrUnavailable, e.cause)
}
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// ValidateAppend checks the arguments every backend refuses alike.
func ValidateAppend(stream string, events []EventData) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream name", ErrInvalidAppend)
	}
	if len(events) == 0 {
		return fmt.Errorf("append %s: %w: no events", stream, ErrInvalidAppend)
	}
	if len(events) > MaxAppendBatch {
		return fmt.Errorf("append %s: %w: %d events, at most %d", stream, ErrInvalidAppend, len(events), MaxAppendBatch)
	}
	seen := make(map[string]struct{}, len(events))
	for i, e := range events {
		if e.ID == "" || e.Type == "" {
			return fmt.Errorf("append %s: %w: event %d lacks an id or type", stream, ErrInvalidAppend, i)
		}
		if _, dup := seen[e.ID]; dup {
			return fmt.Errorf("append %s: %w: event id %s repeated in one append", stream, ErrInvalidAppend, e.ID)
		}
		seen[e.ID] = struct{}{}
	}
	return nil
}
