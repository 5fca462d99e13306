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
