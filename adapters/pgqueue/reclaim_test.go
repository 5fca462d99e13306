package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// answerLost is a database whose first claim commits and then loses its
// answer, as when the connection dies after the commit (a failover).
type answerLost struct {
	pgqueue.DB
	lost atomic.Bool
}

func (d *answerLost) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := d.DB.Query(ctx, sql, args...)
	if err != nil || !strings.Contains(sql, "WITH candidate") || d.lost.Swap(true) {
		return rows, err
	}
	for rows.Next() {
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("unexpected EOF")
}

// A claim whose answer was lost after it committed does not leave its
// messages hidden for the visibility timeout (an hour here): the claimer
// gives them back at its next claim, uncounted, and handles them.
func TestALostClaimAnswerIsReclaimed(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	db := &answerLost{DB: rig.Pool}
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.DB, c.VisibilityTimeout = db, time.Hour })
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-A", MessageID: "A1", Value: []byte("{}")},
	}))
	var (
		mu  sync.Mutex
		got []transport.Origin
	)
	rig.Go("consume", func(ctx context.Context) error {
		return q.Consume(ctx, func(_ context.Context, in transport.Inbound) transport.Disposition {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, in.Origin)
			return transport.Disposition{Action: transport.ActionAck}
		})
	})
	rig.Poll("the message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	require.True(t, db.lost.Load(), "the first claim's answer was lost")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 2, got[0].Attempt, "claimed twice; the lost claim is not counted against it")
	var uncounted int
	require.NoError(t, rig.Pool.QueryRow(t.Context(), "SELECT uncounted FROM "+rig.Schema+".messages WHERE message_id = 'A1'").Scan(&uncounted))
	require.Equal(t, 1, uncounted)
}

// A worker restarted under its worker id after it died holding a claimed
// message (SIGKILL between the queue's claim and the ledger's) gives that
// message back before it claims anything: it is handled at once, not after
// the visibility timeout (an hour here), and the dead process's claim stays
// counted. A message the dead process had settled into a retry's back-off
// stays hidden for it.
func TestARestartedWorkerGivesBackWhatItDiedHolding(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) {
		c.VisibilityTimeout, c.RetryBackoff, c.MaxRetryBackoff = time.Hour, time.Hour, time.Hour
	})
	rig.Approve("OP-1")
	stopRelay := rig.Go("relay", rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil).Run)
	var died []pgqueue.Claimed
	rig.Poll("the request claimed by the process that dies", func() bool {
		var err error
		died, err = q.Claim(t.Context(), "w1", 1)
		require.NoError(t, err)
		return len(died) == 1
	})
	stopRelay()
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-B", MessageID: "B1", Value: []byte("{}")},
	}))
	backingOff, err := q.Claim(t.Context(), "w1", 1)
	require.NoError(t, err)
	require.Len(t, backingOff, 1)
	require.Equal(t, "B1", backingOff[0].MessageID)
	require.NoError(t, q.Settle(t.Context(), backingOff[0], transport.Disposition{Action: transport.ActionRetry, Err: errors.New("failed")}))
	// The process dies here, holding the first message.

	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })
	claimed := rig.WaitRecords("the request handled by the restarted worker", 1, transporttest.Status(domain.StatusClaimed))
	require.Equal(t, 2, claimed[0].Origin.Attempt)
	require.Equal(t, died[0].MessageID, string(claimed[0].MessageID))
	rig.Once("OP-1")
	table := pgx.Identifier{rig.Schema, "messages"}.Sanitize()
	var uncounted int
	require.NoError(t, rig.Pool.QueryRow(t.Context(), "SELECT uncounted FROM "+table+" WHERE message_id = $1", died[0].MessageID).Scan(&uncounted))
	require.Equal(t, 0, uncounted, "the dead process's claim stays counted")
	var attempts int
	var hidden bool
	require.NoError(t, rig.Pool.QueryRow(t.Context(), "SELECT attempts, visible_at > now() + interval '30 minutes' FROM "+table+
		" WHERE message_id = 'B1'").Scan(&attempts, &hidden))
	require.Equal(t, 1, attempts, "the message backing off was not handed out again")
	require.True(t, hidden, "it is still hidden for its back-off")
}
