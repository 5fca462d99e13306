package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/transport"
)

// leaderReleaseTimeout bounds closing the lock's connection, so stopping
// never hangs on an unreachable server.
const leaderReleaseTimeout = 5 * time.Second

// Leader is a relay's transport.Leadership on PostgreSQL: a session-level
// advisory lock held on a connection of its own, outside any pool. The lock
// lives exactly as long as that session: when the process dies or the
// connection breaks (or is terminated), the server releases it and a
// standby's next TryAcquire takes it. Check pings the session. Like the
// projector's leader lock (projections), but keyed per relay. Not safe for
// concurrent use (one relay's Run uses it).
type Leader struct {
	config *pgx.ConnConfig
	key    string
	conn   *pgx.Conn // nil until connected, and after release
	pid    atomic.Uint32
}

// NewLeader returns the leadership of relay name over the transport schema
// (DefaultSchema when empty), connecting like pool (one more connection,
// with application_name "opledger-relay-<name>"). Every instance that
// relays the same log into the same transport schema must use the same
// schema and name. It does no I/O.
func NewLeader(pool *pgxpool.Pool, schema, name string) (*Leader, error) {
	if pool == nil {
		return nil, errors.New("pgqueue: leader: nil pool")
	}
	return NewLeaderConfig(pool.Config().ConnConfig, schema, name)
}

// NewLeaderConfig is NewLeader for a connection configuration (copied).
func NewLeaderConfig(config *pgx.ConnConfig, schema, name string) (*Leader, error) {
	schema, err := schemaName(schema)
	if err != nil {
		return nil, err
	}
	if config == nil || name == "" {
		return nil, errors.New("pgqueue: leader: a connection config and a relay name are required")
	}
	c := config.Copy()
	c.RuntimeParams["application_name"] = "opledger-relay-" + name
	return &Leader{config: c, key: leaderKey(schema, name)}, nil
}

// leaderKey is the advisory lock of one relay (hashtextextended of it).
// Never change it: an old and a new binary would both lead.
func leaderKey(schema, name string) string {
	return "opledger.transport.relay-leader:" + schema + "/" + name
}

// TryAcquire implements transport.Leadership: it connects if needed and
// tries the lock once. A refused lock keeps the connection for the next try.
func (l *Leader) TryAcquire(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		conn, err := pgx.ConnectConfig(ctx, l.config)
		if err != nil {
			return false, fmt.Errorf("relay leader lock: connect: %w", err)
		}
		l.conn = conn
		l.pid.Store(conn.PgConn().PID())
	}
	var held bool
	if err := l.conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, l.key).Scan(&held); err != nil {
		l.Release(ctx)
		return false, fmt.Errorf("relay leader lock: try: %w", err)
	}
	return held, nil
}

// Check implements transport.Leadership: nil while the lock's session
// answers (a session-level lock is held as long as its session lives, and
// nothing here unlocks it), else an error wrapping
// transport.ErrLeadershipLost.
func (l *Leader) Check(ctx context.Context) error {
	if l.conn == nil {
		return fmt.Errorf("%w: not connected", transport.ErrLeadershipLost)
	}
	if err := l.conn.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.Release(ctx)
		return fmt.Errorf("%w: %v", transport.ErrLeadershipLost, err)
	}
	return nil
}

// Release implements transport.Leadership: it ends the lock's session,
// which releases the lock.
func (l *Leader) Release(ctx context.Context) {
	if l.conn == nil {
		return
	}
	// Release runs when the relay stops, its context already ended: closing
	// the session outlives ctx, bounded by leaderReleaseTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaderReleaseTimeout)
	defer cancel()
	_ = l.conn.Close(ctx) // closing the session releases the lock; nothing to do on error
	l.conn = nil
	l.pid.Store(0)
}

// BackendPID returns the server process of the lock's session
// (pg_stat_activity.pid), 0 when not connected: for operators and tests.
// Safe for concurrent use.
func (l *Leader) BackendPID() uint32 { return l.pid.Load() }

var _ transport.Leadership = (*Leader)(nil)
