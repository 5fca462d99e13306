package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// newQueue builds a queue on the rig's transport schema.
func newQueue(t *testing.T, rig *transporttest.Rig, worker string, tune func(*pgqueue.Config)) *pgqueue.Queue {
	t.Helper()
	cfg := pgqueue.Config{
		DB: rig.Pool, Schema: rig.Schema, WorkerID: worker, Concurrency: 2,
		PollMin: time.Millisecond, PollMax: 20 * time.Millisecond, Logger: rig.World.Logger,
	}
	if tune != nil {
		tune(&cfg)
	}
	q, err := pgqueue.New(cfg)
	require.NoError(t, err)
	return q
}

// A worker that dies after the ledger recorded its result, before
// acknowledging, gives the message back when its visibility timeout passes;
// the copy is a DuplicateDelivery and the provider sees no second request.
// The dead worker's late acknowledgement is refused: its claim was taken over.
func TestRedeliveryAfterUnacknowledgedIsDuplicate(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.VisibilityTimeout = time.Second })
	rig.Approve("OP-1")
	relay := rig.Relay("refund-requests", q, transport.SelectRefundRequests, nil)
	rig.Go("relay", relay.Run)

	var first []pgqueue.Claimed
	rig.Poll("the request in the queue", func() bool {
		var err error
		first, err = q.Claim(t.Context(), "w1", 1)
		require.NoError(t, err)
		return len(first) == 1
	})
	d := rig.Handler("w1")(t.Context(), first[0].Inbound())
	require.Equal(t, transport.ActionAck, d.Action)
	require.Equal(t, domain.StatusClaimed, d.Result.Claim.Status)
	// w1 dies here: no Settle.

	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w2")) })
	dup := rig.WaitRecords("the redelivery", 1, transporttest.Status(domain.StatusDuplicateDelivery))
	require.Equal(t, "w2", dup[0].Worker)
	require.Equal(t, 2, dup[0].Origin.Attempt)
	rig.Once("OP-1")

	err := q.Settle(t.Context(), first[0], transport.Disposition{Action: transport.ActionAck})
	require.ErrorIs(t, err, pgqueue.ErrClaimLost)
}

// One message per key is in flight: a second message of an operation is not
// handed out while the first is claimed, while other keys are.
func TestClaimKeepsOrderPerKey(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", nil)
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-A", MessageID: "A1", Value: []byte("{}")},
		{Topic: transport.TopicRefundRequests, Key: "OP-A", MessageID: "A2", Value: []byte("{}")},
		{Topic: transport.TopicRefundRequests, Key: "OP-B", MessageID: "B1", Value: []byte("{}")},
	}))
	got, err := q.Claim(t.Context(), "w1", 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, []string{"A1", "B1"}, []string{got[0].MessageID, got[1].MessageID})
	more, err := q.Claim(t.Context(), "w2", 10)
	require.NoError(t, err)
	require.Empty(t, more, "A2 waits for A1")
	require.NoError(t, q.Settle(t.Context(), got[0], transport.Disposition{Action: transport.ActionAck}))
	more, err = q.Claim(t.Context(), "w2", 10)
	require.NoError(t, err)
	require.Len(t, more, 1)
	require.Equal(t, "A2", more[0].MessageID)
}

// The store being unavailable is a Retry: the row is hidden for the back-off
// and handed out again, never acknowledged.
func TestRetryHidesTheMessage(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.RetryBackoff = time.Hour; c.MaxRetryBackoff = time.Hour })
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{{Topic: transport.TopicRefundRequests, Key: "OP-A", MessageID: "A1", Value: []byte("{}")}}))
	got, err := q.Claim(t.Context(), "w1", 1)
	require.NoError(t, err)
	require.NoError(t, q.Settle(t.Context(), got[0], transport.Disposition{Action: transport.ActionRetry, Err: errors.New("store down")}))
	more, err := q.Claim(t.Context(), "w1", 1)
	require.NoError(t, err)
	require.Empty(t, more)
	msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
	require.NoError(t, err)
	require.Equal(t, "ready", msgs[0].State)
}

// A Consume claims ahead of its handlers; what it claimed ahead and never
// started when it stops is given back at once, the claim not counted, and
// another claimer takes it without waiting out the visibility timeout.
func TestStopGivesBackWhatWasClaimedAhead(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.Concurrency = 1 })
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-A", MessageID: "A1", Value: []byte("{}")},
		{Topic: transport.TopicRefundRequests, Key: "OP-B", MessageID: "B1", Value: []byte("{}")},
	}))
	started, finish := make(chan string, 2), make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- q.Consume(ctx, func(_ context.Context, in transport.Inbound) transport.Disposition {
			started <- string(in.Key)
			<-finish
			return transport.Disposition{Action: transport.ActionAck}
		})
	}()
	require.Equal(t, "OP-A", <-started)
	rig.Poll("B1 claimed ahead", func() bool {
		msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
		return err == nil && len(msgs) == 2 && msgs[1].Attempts == 1
	})
	cancel()
	close(finish)
	require.ErrorIs(t, <-done, context.Canceled)
	require.Empty(t, started, "B1 was never handled")

	msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"acked", "ready"}, []string{msgs[0].State, msgs[1].State})
	got, err := q.Claim(t.Context(), "w2", 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "B1 is visible again at once")
	require.Equal(t, "B1", got[0].MessageID)
	require.Equal(t, 2, got[0].Attempt)
	require.Equal(t, 1, got[0].Counted(), "the claim given back is not counted")
}
