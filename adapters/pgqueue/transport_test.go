package pgqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// The Postgres queue passes the transport contract. Its real difference:
// one row per (topic, message id), so a republished id is not delivered
// again.
func TestTransportContract(t *testing.T) {
	t.Parallel()
	transporttest.Run(t, transporttest.Features{OneCopyPerMessageID: true}, newTransport)
}

// newTransport is the Postgres queue on the rig's transport schema: each
// consumer its own claimer of the one queue.
func newTransport(t *testing.T, rig *transporttest.Rig) transporttest.Transport {
	q := newQueue(t, rig, "publisher", nil)
	var (
		mu   sync.Mutex
		lose bool
	)
	return transporttest.Transport{
		Publisher: q,
		Consume: func(ctx context.Context, worker string, handle transport.HandleFunc) error {
			mu.Lock()
			lost := lose
			lose = false
			mu.Unlock()
			if !lost {
				return newQueue(t, rig, worker, nil).Consume(ctx, handle)
			}
			// The worker handles its first claim and dies before settling
			// it: the row comes back when its visibility timeout passes.
			c := newQueue(t, rig, worker, func(c *pgqueue.Config) { c.VisibilityTimeout = time.Second })
			first := claimOne(t, rig, c, worker)
			handle(ctx, first.Inbound())
			return c.Consume(ctx, handle)
		},
		Messages: func(topic string) []transporttest.Message {
			msgs, err := q.ListTopic(t.Context(), topic, 0, 100)
			require.NoError(t, err)
			var out []transporttest.Message
			for _, m := range msgs {
				out = append(out, transporttest.Message{ID: m.MessageID, Key: m.Key, Value: m.Value})
			}
			return out
		},
		DeadLetters: q,
		LoseNextAck: func() { mu.Lock(); lose = true; mu.Unlock() },
		Strand: func(worker string, op domain.OperationID) transporttest.Record {
			// The worker dies after the refund, before acknowledging; with
			// MaxAttempts 1 the next claim dead-letters the row instead of
			// handing it out again.
			c := newQueue(t, rig, worker, func(c *pgqueue.Config) { c.MaxAttempts = 1; c.VisibilityTimeout = time.Second })
			first := claimOne(t, rig, c, worker)
			d := rig.Handler(worker)(t.Context(), first.Inbound())
			require.Equal(t, domain.StatusClaimed, d.Result.Claim.Status)
			rig.Poll("the attempts exhausted", func() bool {
				got, err := c.Claim(t.Context(), "reaper", 1)
				require.NoError(t, err)
				return len(got) == 1 && got[0].Exhausted
			})
			dead, err := q.ListDeadLetters(t.Context(), 10)
			require.NoError(t, err)
			require.Len(t, dead, 1)
			require.Equal(t, transport.ReasonDeliveryAttemptsExhausted, dead[0].Reason)
			require.Equal(t, "1", dead[0].Headers[transport.HeaderDeadAttempts])
			require.Contains(t, dead[0].Detail, "handed out 1 times")
			return rig.Find(func(r transporttest.Record) bool { return r.Worker == worker })[0]
		},
		Unacknowledged: func(topic string) int {
			msgs, err := q.ListTopic(t.Context(), topic, 0, 100)
			require.NoError(t, err)
			n := 0
			for _, m := range msgs {
				require.Equal(t, 1, m.Attempts, "row %d handed out once", m.ID)
				if m.State != "acked" {
					n++
				}
			}
			return n
		},
	}
}

// claimOne polls q until it hands worker one message.
func claimOne(t *testing.T, rig *transporttest.Rig, q *pgqueue.Queue, worker string) pgqueue.Claimed {
	t.Helper()
	var got []pgqueue.Claimed
	rig.Poll("a message to claim", func() bool {
		var err error
		got, err = q.Claim(t.Context(), worker, 1)
		require.NoError(t, err)
		return len(got) == 1
	})
	return got[0]
}
