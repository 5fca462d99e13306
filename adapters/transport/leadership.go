package transport

import (
	"context"
	"errors"
)

// ErrLeadershipLost is wrapped by Leadership.Check once the lock is no
// longer held (its session ended): another relay may hold it now.
var ErrLeadershipLost = errors.New("transport: relay leadership lost")

// Leadership is a lock that at most one relay of a name holds at a time,
// across processes: a Relay publishes only while it holds its own, so N
// serve instances publish each message once in the normal case.
// pgqueue.Leader is the PostgreSQL one (a session-level advisory lock on a
// connection of its own, released by the server when that session dies). A
// Relay without one always leads: a single instance, the in-memory store,
// the demo.
//
// What it does not prevent: a leader whose session died while it was
// publishing a batch finishes that batch, and the new leader publishes it
// again from the checkpoint. The copies carry the same message ids, which
// the consumers absorb (see the package doc).
//
// A Relay calls its Leadership from its Run goroutine only; implementations
// need not be safe for concurrent use.
type Leadership interface {
	// TryAcquire tries once to take the lock: true when it is held (already
	// or now), false without error when another holder has it.
	TryAcquire(ctx context.Context) (bool, error)
	// Check returns nil while the lock is held, an error wrapping
	// ErrLeadershipLost once it is not, or ctx's error.
	Check(ctx context.Context) error
	// Release gives the lock up; it may outlive ctx by a short bound, since
	// a relay releases when its context has ended. Releasing a lock not held
	// is a no-op.
	Release(ctx context.Context)
}

// soleLeader is the Leadership of a relay that runs alone.
type soleLeader struct{}

func (soleLeader) TryAcquire(context.Context) (bool, error) { return true, nil }
func (soleLeader) Check(context.Context) error              { return nil }
func (soleLeader) Release(context.Context)                  {}
