package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// errLeadershipLost means the leader lock's session ended (the dedicated
// connection broke or was terminated): the server released the lock and
// another projector may hold it now.
var errLeadershipLost = errors.New("projection leader lock lost")

// releaseTimeout bounds closing the lock connection, so stopping never hangs
// on an unreachable server.
const releaseTimeout = 5 * time.Second

// leaderLock is a session-level advisory lock held on a connection of its
// own, outside the pool: the lock lives exactly as long as that session, so
// when the projector's process dies or its connection breaks the server
// releases it and a waiting projector takes over. Not safe for concurrent
// use.
type leaderLock struct {
	config *pgx.ConnConfig
	key    string
	conn   *pgx.Conn // nil until connected, and after release
}

func newLeaderLock(config *pgx.ConnConfig, key string) *leaderLock {
	return &leaderLock{config: config, key: key}
}

// tryAcquire tries the lock once, connecting first if needed. It returns
// false, without error, when another session holds it; the connection is
// kept for the next try.
func (l *leaderLock) tryAcquire(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, l.config)
		if err != nil {
			return false, fmt.Errorf("leader lock: connect: %w", err)
		}
		l.conn = conn
	}
	var held bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, l.key).Scan(&held); err != nil {
		l.release()
		return false, fmt.Errorf("leader lock: try: %w", err)
	}
	return held, nil
}

// check returns an error wrapping errLeadershipLost unless the lock's
// session is alive (a session-level lock is held for as long as its session
// lives, and nothing here unlocks it).
func (l *leaderLock) check(ctx context.Context) error {
	if l.conn == nil {
		return fmt.Errorf("%w: not connected", errLeadershipLost)
	}
	if err := l.conn.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.release()
		return fmt.Errorf("%w: %v", errLeadershipLost, err)
	}
	return nil
}

// release ends the lock's session, which releases the lock.
func (l *leaderLock) release() {
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = l.conn.Close(ctx) // closing the session is what releases the lock; nothing to do on error
	l.conn = nil
}

// pid returns the lock session's backend process id (0 when not connected).
func (l *leaderLock) pid() uint32 {
	if l.conn == nil {
		return 0
	}
	return l.conn.PgConn().PID()
}
