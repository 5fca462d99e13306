// Package pgleader is follow.Leadership on PostgreSQL: a session-level
// advisory lock held on a connection of its own, outside any pool. The one
// implementation of leader election in opledger: the relays and the
// projector lead under it.
package pgleader

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore/follow"
)

// releaseTimeout bounds closing the lock's connection, so stopping never
// hangs on an unreachable server.
const releaseTimeout = 5 * time.Second

// Lock is a session-level advisory lock on pg_try_advisory_lock(
// hashtextextended(key, 0)), held on a connection of its own. The lock
// lives exactly as long as that session: when the process dies or the
// connection breaks (or is terminated), the server releases it and a
// standby's next TryAcquire takes it. Check pings the session. Not safe for
// concurrent use (one follower uses it), except BackendPID.
type Lock struct {
	config *pgx.ConnConfig
	key    string
	conn   *pgx.Conn // nil until connected, and after release
	pid    atomic.Uint32
}

// New returns the lock on key, connecting with a copy of config whose
// application_name is applicationName (pg_stat_activity shows it). Every
// instance that must not lead at the same time uses the same key; never
// change a key in use (an old and a new binary would both lead). It does no
// I/O.
func New(config *pgx.ConnConfig, key, applicationName string) (*Lock, error) {
	if config == nil || key == "" {
		return nil, errors.New("pgleader: a connection config and a key are required")
	}
	c := config.Copy()
	if applicationName != "" {
		c.RuntimeParams["application_name"] = applicationName
	}
	return &Lock{config: c, key: key}, nil
}

// TryAcquire implements follow.Leadership: it connects if needed and tries
// the lock once. A refused lock keeps the connection for the next try.
func (l *Lock) TryAcquire(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, l.config)
		if err != nil {
			return false, fmt.Errorf("leader lock: connect: %w", err)
		}
		l.conn = conn
		l.pid.Store(conn.PgConn().PID())
	}
	var held bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, l.key).Scan(&held); err != nil {
		l.Release(ctx)
		return false, fmt.Errorf("leader lock: try: %w", err)
	}
	return held, nil
}

// Check implements follow.Leadership: nil while the lock's session answers
// (a session-level lock is held as long as its session lives, and nothing
// here unlocks it), else an error wrapping follow.ErrLeadershipLost.
func (l *Lock) Check(ctx context.Context) error {
	if l.conn == nil {
		return fmt.Errorf("%w: not connected", follow.ErrLeadershipLost)
	}
	if err := l.conn.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.Release(ctx)
		return fmt.Errorf("%w: %v", follow.ErrLeadershipLost, err)
	}
	return nil
}

// Release implements follow.Leadership: it ends the lock's session, which
// releases the lock.
func (l *Lock) Release(ctx context.Context) {
	if l.conn == nil {
		return
	}
	// Release runs when the follower stops, its context already ended:
	// closing the session outlives ctx, bounded by releaseTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = l.conn.Close(ctx) // closing the session releases the lock; nothing to do on error
	l.conn = nil
	l.pid.Store(0)
}

// BackendPID returns the server process of the lock's session
// (pg_stat_activity.pid), 0 when not connected: for operators and tests.
// Safe for concurrent use.
func (l *Lock) BackendPID() uint32 { return l.pid.Load() }

var _ follow.Leadership = (*Lock)(nil)
