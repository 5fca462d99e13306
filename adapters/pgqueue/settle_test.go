package pgqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
	"opledger/eventstore"
)

// settleOnOwnPool sends the settles of a handled message (every Exec: the
// outage's, a retry's; QueryRow: a counted retry's) through a pool of
// their own, and the claims and acknowledgements (Query) through the rig's.
// The test kills the settle pool's sessions; the claims never fail, so the
// claim loop's reclaim of a lost claim answer has nothing to do with what
// the test sees.
type settleOnOwnPool struct {
	pgqueue.DB
	settle *pgxpool.Pool
}

func (d settleOnOwnPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.settle.Exec(ctx, sql, args...)
}

func (d settleOnOwnPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.settle.QueryRow(ctx, sql, args...)
}

// A message whose settle fails because the queue's database went away
// under it (an immediate restart: the pool's sessions are gone) is settled
// once the database answers again, not left hidden for the visibility
// timeout (an hour here). The handler met an outage of the ledger's store
// and said Retry; its settle ran on a session the server had terminated.
// chaos.sh saw an operation stay Authorized for its whole settle window
// after PostgreSQL restarted: its message was claimed, handled into the
// outage, and the outage's settle failed, so it stayed hidden for the
// visibility timeout (2m) while the ledger had nothing to say about it.
func TestASettleThatMetADeadSessionIsTriedAgain(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	app := "pgqueue-settle-" + rig.Schema[len(rig.Schema)-8:] // within NAMEDATALEN
	cfg := rig.Pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	// Hand out an idle session as it is, without a liveness ping, as a
	// pool does with one idle for less than a second: the killed session
	// is what the settle gets.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	// One session: the relay's publishes and the consumer's statements
	// run on this pool too, and at two sessions the termination below
	// counted 2 whenever they had overlapped.
	cfg.MaxConns = 1
	settlePool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(settlePool.Close)
	require.NoError(t, settlePool.Ping(t.Context()), "one idle session in the settle pool")

	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) {
		c.DB, c.VisibilityTimeout = settleOnOwnPool{DB: rig.Pool, settle: settlePool}, time.Hour
		c.RetryBackoff, c.MaxOutageBackoff = time.Millisecond, time.Millisecond
	})
	rig.Approve("OP-1")
	relay := rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil)
	rig.Go("relay", relay.Run)

	dispatch := rig.Handler("w1")
	var (
		mu     sync.Mutex
		killed int
	)
	handle := func(ctx context.Context, in transport.Inbound) transport.Disposition {
		mu.Lock()
		first := in.Origin.Attempt == 1
		mu.Unlock()
		if !first {
			return dispatch(ctx, in)
		}
		// The database restarts while the message is handled: the
		// ledger's store is out (the handler's answer), and every session
		// of the settle pool is gone (waiting for each to exit).
		var n int
		require.NoError(t, rig.Pool.QueryRow(ctx,
			`SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
		mu.Lock()
		killed = n
		mu.Unlock()
		return transport.Disposition{Action: transport.ActionRetry, Err: eventstore.Unavailable("append", context.DeadlineExceeded)}
	}
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Record("w1", handle)) })

	claimed := rig.WaitRecords("the claim after the restart", 1, transporttest.Status(domain.StatusClaimed))
	require.Equal(t, 2, claimed[0].Origin.Attempt, "handed out again after the outage, long before the visibility timeout")
	mu.Lock()
	require.Equal(t, 1, killed, "the settle pool's idle session was terminated under the settle")
	mu.Unlock()
	rig.Once("OP-1")
	var uncounted int
	require.NoError(t, rig.Pool.QueryRow(t.Context(), "SELECT uncounted FROM "+pgx.Identifier{rig.Schema, "messages"}.Sanitize()+
		" WHERE message_id = $1", claimed[0].MessageID).Scan(&uncounted))
	require.Equal(t, 1, uncounted, "the attempt that met the outage is not counted against the message")
}
