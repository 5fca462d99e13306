package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/provider/sim"
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

func status(s domain.ClaimStatus) func(transporttest.Record) bool {
	return func(r transporttest.Record) bool {
		return r.Disposition.Handled && r.Disposition.Result.Claim.Status == s
	}
}

func once(t *testing.T, rig *transporttest.Rig, op domain.OperationID) {
	t.Helper()
	require.Equal(t, sim.Counters{RequestsReceived: 1, RefundsCreated: 1}, rig.Counters(op), "simulator ledger for %s", op)
}

// The end-to-end scenario on the Postgres-only transport: the relay
// publishes a request per capability into the queue, workers take them with
// SKIP LOCKED, and every refund happens once on the provider's ledger.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", nil)
	relay := rig.Relay("refund-requests", q, transport.SelectRefundRequests, nil)
	rig.Go("relay", relay.Run)
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })

	ops := []domain.OperationID{"OP-1", "OP-2", "OP-3", "OP-4"}
	for _, op := range ops {
		rig.Approve(op)
	}
	rig.WaitRecords("claims", len(ops), status(domain.StatusClaimed))
	for _, op := range ops {
		once(t, rig, op)
		st, err := rig.World.State(t.Context(), op)
		require.NoError(t, err)
		require.Equal(t, domain.ExecCompleted, st.CurrentExecution().State, "%s", op)
	}
	// The recorder sees a disposition just before the queue settles it.
	rig.Poll("every request acknowledged once", func() bool {
		msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 100)
		require.NoError(t, err)
		require.Len(t, msgs, len(ops))
		for _, m := range msgs {
			require.Equal(t, 1, m.Attempts, "row %d", m.ID)
			if m.State != "acked" {
				return false
			}
		}
		return true
	})
}

// A relay that dies after publishing and before saving its checkpoint
// publishes the same message ids again: the queue keeps one row per id, and
// the refund happens once.
func TestRelayCrashAfterPublishIsAbsorbed(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", nil)
	rig.Approve("OP-1")
	pub, checks := transporttest.CrashAfterPublish(q, rig.Checks, 2)
	relay := rig.Relay("refund-requests", pub, transport.SelectRefundRequests, checks)
	rig.Go("relay", relay.Run)
	rig.Poll("three publications of the request", func() bool { return relay.Published() >= 3 })
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })
	rig.WaitRecords("the claim", 1, status(domain.StatusClaimed))

	msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 100)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "one row per message id, however often it was published")
	once(t, rig, "OP-1")
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
	dup := rig.WaitRecords("the redelivery", 1, status(domain.StatusDuplicateDelivery))
	require.Equal(t, "w2", dup[0].Worker)
	require.Equal(t, 2, dup[0].Origin.Attempt)
	once(t, rig, "OP-1")

	err := q.Settle(t.Context(), first[0], transport.Disposition{Action: transport.ActionAck})
	require.ErrorIs(t, err, pgqueue.ErrClaimLost)
}

// Bad input never stops the queue and never disappears: an undecodable
// message, one with a malformed id and one for an unknown operation are
// dead-lettered with their reason and recorded as evidence, and the next
// message of the same key is still processed.
func TestPoisonMessagesAreDeadLettered(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", nil)
	ref := rig.Approve("OP-1")
	good, err := transport.RefundRequest{MessageID: "MSG-GOOD", OperationID: ref.Operation, CapabilityID: ref.Capability}.Encode()
	require.NoError(t, err)
	badID, err := transport.RefundRequest{MessageID: "MSG-BAD", OperationID: "OP-1", CapabilityID: "not-a-capability"}.Encode()
	require.NoError(t, err)
	unknown, err := transport.RefundRequest{MessageID: "MSG-NOWHERE", OperationID: "OP-404", CapabilityID: "CAP-X"}.Encode()
	require.NoError(t, err)
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "junk-1", Value: []byte("{not json")},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "junk-2", Value: badID},
		{Topic: transport.TopicRefundRequests, Key: "OP-404", MessageID: "junk-3", Value: unknown},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "MSG-GOOD", Value: good},
	}))
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })
	rig.WaitRecords("the good message", 1, status(domain.StatusClaimed))
	once(t, rig, "OP-1")

	// OP-404 is another key: it may be settled after the good message.
	var dead []transport.DeadLetter
	rig.Poll("three dead letters", func() bool {
		var err error
		dead, err = q.ListDeadLetters(t.Context(), 10)
		require.NoError(t, err)
		return len(dead) == 3
	})
	reasons := map[string]domain.Reason{}
	for _, dl := range dead {
		reasons[dl.MessageID.String()] = dl.Reason
		require.Equal(t, string(dl.Reason), dl.Headers[transport.HeaderDeadReason])
		require.NotEmpty(t, dl.Detail)
	}
	require.Equal(t, map[string]domain.Reason{
		"junk-1": transport.ReasonDeliveryMalformed, "junk-2": transport.ReasonDeliveryMalformed, "junk-3": domain.ReasonOperationUnknown,
	}, reasons)

	evidence := map[domain.Reason]int{}
	for _, ev := range rig.Evidence() {
		require.False(t, ev.ExecutionAttempted)
		evidence[ev.Reason]++
	}
	require.Equal(t, map[domain.Reason]int{transport.ReasonDeliveryMalformed: 2, domain.ReasonOperationUnknown: 1}, evidence)
}

// The seed's Friday case on the Postgres-only transport: a request whose
// worker died after the refund (never acknowledged) exhausts its attempts
// and is dead-lettered; "resubmit all" sends a copy under a new message id;
// the ledger refuses the spent authority (replay suspected), the signals
// relay publishes a security signal, and the provider sees one request.
func TestResubmitSpentAuthorityIsRefusedAndSignalled(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.MaxAttempts = 1; c.VisibilityTimeout = time.Second })
	ref := rig.Approve("OP-4471")
	rig.Go("relay", rig.Relay("refund-requests", q, transport.SelectRefundRequests, nil).Run)
	rig.Go("signals", rig.Relay("security-signals", q, transport.SelectSecuritySignals, nil).Run)

	var first []pgqueue.Claimed
	rig.Poll("the request in the queue", func() bool {
		var err error
		first, err = q.Claim(t.Context(), "w1", 1)
		require.NoError(t, err)
		return len(first) == 1
	})
	d := rig.Handler("w1")(t.Context(), first[0].Inbound())
	require.Equal(t, domain.StatusClaimed, d.Result.Claim.Status)
	once(t, rig, "OP-4471")
	// w1 dies before acknowledging; with MaxAttempts 1 the next claim
	// dead-letters the row instead of handing it out again.
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w2")) })
	var dead []transport.DeadLetter
	rig.Poll("the dead letter", func() bool {
		var err error
		dead, err = q.ListDeadLetters(t.Context(), 10)
		require.NoError(t, err)
		return len(dead) == 1
	})
	require.Equal(t, transport.ReasonDeliveryAttemptsExhausted, dead[0].Reason)
	require.Equal(t, "1", dead[0].Headers[transport.HeaderDeadAttempts])
	require.Contains(t, dead[0].Detail, "handed out 1 times")

	// Friday 15:30: resubmit all.
	rs, err := q.Resubmit(t.Context(), transport.ResubmitRequest{All: true, By: "operator-1"})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.NotEqual(t, first[0].MessageID, string(rs[0].MessageID))
	refused := rig.WaitRecords("the resubmitted copy", 1, status(domain.StatusAlreadyConsumed))
	require.Equal(t, rs[0].MessageID, refused[0].MessageID)
	require.True(t, refused[0].Disposition.Result.Claim.ReplaySuspected)
	require.Equal(t, transport.ActionAck, refused[0].Disposition.Action, "a refusal is final: acknowledged, not dead-lettered again")
	once(t, rig, "OP-4471")

	var signals []pgqueue.Message
	rig.Poll("the security signal", func() bool {
		var err error
		signals, err = q.ListTopic(t.Context(), transport.TopicSecuritySignals, 0, 10)
		require.NoError(t, err)
		return len(signals) == 1
	})
	sig, err := transport.DecodeSecuritySignal(signals[0].Value)
	require.NoError(t, err)
	require.Equal(t, ref.Capability, sig.CapabilityID)
	require.Equal(t, rs[0].MessageID, sig.MessageID)
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, sig.Reason)
	require.False(t, sig.ExecutionAttempted)

	_, err = q.Resubmit(t.Context(), transport.ResubmitRequest{IDs: []string{dead[0].ID}, By: "operator-1"})
	require.ErrorIs(t, err, transport.ErrAlreadyResubmitted)
	listed, err := q.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.NotNil(t, listed[0].Resubmitted)
	require.Equal(t, rs[0].MessageID, listed[0].Resubmitted.MessageID)
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
