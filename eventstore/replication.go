package eventstore

import "context"

// Replication is what a store's server says, at one moment, of where a
// write it acknowledges is kept: on its own disk only, or also on a standby
// that a failover would promote. A store whose acknowledged writes can
// vanish with its machine makes a spent capability look unused, so the
// processes that write report this and may refuse to run without it.
type Replication struct {
	// Synchronous is true when a commit acknowledged now has reached at
	// least one standby first (PostgreSQL: synchronous_commit on,
	// remote_write or remote_apply, synchronous_standby_names set, and a
	// standby in sync or quorum state), so a failover to that standby keeps
	// it.
	Synchronous bool
	// SyncStandbys counts the standbys the server waits for now.
	SyncStandbys int
	// Detail says in words what the server said: its settings and its
	// standbys, and when not synchronous, why not. For people and logs.
	Detail string
}

// ReplicationProbe is implemented by stores that can tell whether their
// writes are synchronously replicated (eventstore/postgres). One call asks
// the server once; it is safe for concurrent use and honours ctx. An
// unreachable server is an error wrapping ErrUnavailable.
type ReplicationProbe interface {
	Replication(ctx context.Context) (Replication, error)
}
