package follow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/eventstore"
)

// Handler is what one role does with the log; the Follower does the rest.
// Its methods are called from the follower's goroutine only, and only while
// the follower leads.
type Handler[T any] interface {
	// Resume returns the position to read after (nil: the start of the
	// log): the role's saved checkpoint. It is called when the follower
	// starts leading, after an outage in Handle or Idle, and after Handle
	// asked for it (Reload). An error is an outage.
	Resume(ctx context.Context) (eventstore.Position, error)
	// Handle handles a batch read after the position Resume or the previous
	// Handle returned, and returns the position to read after next: the
	// batch's last event when all of it is handled, an earlier one (or
	// nil: b.After) when it stopped. Right before an effect only the leader
	// may have (publishing, committing), it calls b.Lead.
	//
	// Its error says what happened: nil; an error wrapping
	// ErrLeadershipLost (the follower steps down); Retry (an event failed,
	// not an outage: the follower pauses, then reads after the returned
	// position); Reload (the checkpoint moved under it: Resume again, not
	// an outage); anything else is an outage: the follower backs off, then
	// calls Resume again, so the role reads again from what it saved.
	Handle(ctx context.Context, b Batch[T]) (eventstore.Position, error)
	// Idle is called when a read finds nothing new, before the follower
	// pauses: a role saves a checkpoint it put off, pings its transport.
	// An error is an outage, after which the follower calls Resume again.
	Idle(ctx context.Context) error
}

// Batch is one read of the log handed to Handle.
type Batch[T any] struct {
	// After is the position the batch was read after.
	After eventstore.Position
	// Events are 1..Config.BatchSize events in global order.
	Events []eventstore.RecordedEvent
	// Prepared is what Config.Prepare made of Events (the zero T without
	// one), on the reading goroutine.
	Prepared T
	// Full says the read came back full: more is likely waiting.
	Full bool

	lead func(context.Context) error
}

// Lead returns nil while the follower still holds its leadership, an error
// wrapping ErrLeadershipLost once it does not, or ctx's error. Handle calls
// it right before an effect only the leader may have, and returns its error
// as it is.
func (b Batch[T]) Lead(ctx context.Context) error {
	if b.lead == nil {
		return nil
	}
	return b.lead(ctx)
}

// retryError is Retry's error.
type retryError struct {
	after time.Duration
	cause error
}

func (e *retryError) Error() string {
	return fmt.Sprintf("%v (tried again in %s)", e.cause, e.after)
}
func (e *retryError) Unwrap() error { return e.cause }

// Retry is what Handle returns when it stopped before an event that failed
// and is to be tried again after a pause of d (the event's own retry
// policy): not an outage, the log waits behind the event meanwhile. The
// position Handle returns with it is kept. CatchUp returns it as it is.
func Retry(d time.Duration, cause error) error {
	return &retryError{after: max(d, 0), cause: cause}
}

// reloadError is Reload's error.
type reloadError struct{ cause error }

func (e *reloadError) Error() string { return e.cause.Error() }
func (e *reloadError) Unwrap() error { return e.cause }

// Reload is what Handle returns when where the role stands moved under it
// (another writer moved its checkpoint): the follower calls Resume before
// it reads again, at once and without counting an outage. A role that
// finds its checkpoint moved again at once should return the plain error
// instead, so that it backs off.
func Reload(cause error) error { return &reloadError{cause: cause} }

// stageError names the stage an outage hit.
type stageError struct {
	stage string
	err   error
}

func (e *stageError) Error() string { return e.err.Error() }
func (e *stageError) Unwrap() error { return e.err }

// AtStage wraps err, an outage of a Handler, with the stage it hit, which
// Status.Stage reports (the stages a follower names itself: StageLeader,
// StageCheckpoint, StageRead, StageHandle, StageIdle). nil stays nil.
func AtStage(stage string, err error) error {
	if err == nil {
		return nil
	}
	return &stageError{stage: stage, err: err}
}

// stageOf is the stage err names, or def.
func stageOf(err error, def string) string {
	var se *stageError
	if errors.As(err, &se) {
		return se.stage
	}
	return def
}

// Stages a follower names itself (Status.Stage); a Handler names its own
// with AtStage.
const (
	StageLeader     = "leader lock" // taking or checking the leadership
	StageCheckpoint = "checkpoint"  // Resume (loading the checkpoint), unless it names another
	StageRead       = "read log"    // reading the global log
	StageHandle     = "handle"      // Handle, unless it names another
	StageIdle       = "idle"        // Idle, unless it names another
)
