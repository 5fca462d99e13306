package follow

import (
	"context"
	"errors"
)

// ErrLeadershipLost is wrapped by Leadership.Check once the lock is no
// longer held (its session ended): another follower may hold it now.
var ErrLeadershipLost = errors.New("follow: leadership lost")

// Leadership is a lock that at most one follower of a name holds at a time,
// across processes. pgleader.Lock is the PostgreSQL one (a session-level
// advisory lock on a connection of its own, released by the server when
// that session dies).
//
// A Follower calls its Leadership from one goroutine at a time (Run or
// CatchUp); implementations need not be safe for concurrent use.
type Leadership interface {
	// TryAcquire tries once to take the lock: true when it is held (already
	// or now), false without error when another holder has it.
	TryAcquire(ctx context.Context) (bool, error)
	// Check returns nil while the lock is held, an error wrapping
	// ErrLeadershipLost once it is not, or ctx's error.
	Check(ctx context.Context) error
	// Release gives the lock up; it may outlive ctx by a short bound, since
	// a follower releases when its context has ended. Releasing a lock not
	// held is a no-op.
	Release(ctx context.Context)
}

// soleLeader is the Leadership of a follower that runs alone.
type soleLeader struct{}

func (soleLeader) TryAcquire(context.Context) (bool, error) { return true, nil }
func (soleLeader) Check(context.Context) error              { return nil }
func (soleLeader) Release(context.Context)                  {}
