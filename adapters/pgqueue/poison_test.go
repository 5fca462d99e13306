package pgqueue_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// poisonedWorld approves healthy operations and one whose stream cannot be
// loaded, relays them into q, and publishes one more message on the
// poisoned operation's key behind its request.
func poisonedWorld(t *testing.T, rig *transporttest.Rig, q *pgqueue.Queue, healthy []domain.OperationID) {
	t.Helper()
	rig.Approve(healthy[0])
	rig.Approve("OP-POISON")
	rig.Corrupt("OP-POISON")
	for _, op := range healthy[1:] {
		rig.Approve(op)
	}
	relay := rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil)
	stop := rig.Go("relay", relay.Run)
	rig.Poll("every request in the queue", func() bool { return relay.Published() >= int64(len(healthy)+1) })
	stop()
	require.NoError(t, q.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-POISON", MessageID: "MSG-BEHIND", Value: []byte("{behind the poison")},
	}))
}

func isPoison(r transporttest.Record) bool { return r.OperationID == "OP-POISON" }

func isBehind(r transporttest.Record) bool {
	return r.Origin.Offset > 0 && r.MessageID == "" && r.OperationID == ""
}

// One poisoned operation among healthy ones: its request fails (its stream
// cannot be loaded: not bad input, not an outage), so it is hidden for a
// back-off, and while it waits the other keys flow and every healthy refund
// happens once; the message behind it on its own key waits its turn.
func TestPoisonedMessageWaitsWhileOtherKeysFlow(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.RetryBackoff, c.MaxRetryBackoff = time.Hour, time.Hour })
	healthy := []domain.OperationID{"OP-1", "OP-2", "OP-3"}
	poisonedWorld(t, rig, q, healthy)
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })

	rig.WaitRecords("the healthy claims", len(healthy), transporttest.Status(domain.StatusClaimed))
	for _, op := range healthy {
		rig.Once(op)
	}
	failed := rig.WaitRecords("the poisoned request's first attempt", 1, isPoison)
	require.Equal(t, transport.ActionRetry, failed[0].Disposition.Action)
	require.ErrorContains(t, failed[0].Disposition.Err, "corrupt")
	require.Equal(t, sim.Counters{}, rig.Counters("OP-POISON"), "nothing reached the provider")
	rig.Poll("the poisoned request hidden for its back-off", func() bool {
		depth, err := q.Depth(t.Context())
		require.NoError(t, err)
		return len(depth) == 1 && depth[0] == pgqueue.TopicDepth{Topic: transport.TopicRefundRequests, Ready: 1, Hidden: 1}
	})
	require.Len(t, rig.Find(isPoison), 1, "hidden: not handed out again yet")
	require.Empty(t, rig.Find(isBehind), "the message behind it on its key waits (order per key)")
	dead, err := q.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, dead)
}

// The poisoned request is retried with a growing back-off up to MaxAttempts
// and then dead-lettered with its reason, the attempts and the last error:
// visible in `opledger dlq list`. The message behind it on its key then
// goes.
func TestPoisonedMessageIsDeadLetteredAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) {
		c.MaxAttempts, c.RetryBackoff, c.MaxRetryBackoff = 3, 5*time.Millisecond, 20*time.Millisecond
	})
	healthy := []domain.OperationID{"OP-1", "OP-2"}
	poisonedWorld(t, rig, q, healthy)
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, rig.Handler("w1")) })

	behind := rig.WaitRecords("the message behind the poison", 1, isBehind)
	require.Equal(t, transport.ActionDeadLetter, behind[0].Disposition.Action, "it is bad input itself")
	require.Len(t, rig.Find(isPoison), 3, "attempted MaxAttempts times, no more")
	for _, op := range healthy {
		rig.Once(op)
	}
	require.Equal(t, sim.Counters{}, rig.Counters("OP-POISON"))

	var dead []transport.DeadLetter
	rig.Poll("two dead letters", func() bool {
		var err error
		dead, err = q.ListDeadLetters(t.Context(), 10)
		require.NoError(t, err)
		return len(dead) == 2
	})
	poison := dead[0]
	require.Equal(t, transport.ReasonDeliveryAttemptsExhausted, poison.Reason)
	require.Contains(t, poison.Detail, "failed 3 times")
	require.Contains(t, poison.Detail, "corrupt")
	require.Equal(t, "3", poison.Headers[transport.HeaderDeadAttempts])
	require.Equal(t, string(transport.ReasonDeliveryAttemptsExhausted), poison.Headers[transport.HeaderDeadReason])
	require.Equal(t, "w1", poison.Headers[transport.HeaderDeadLetteredBy])
	req, err := transport.DecodeRefundRequest(poison.Value)
	require.NoError(t, err)
	require.Equal(t, domain.OperationID("OP-POISON"), req.OperationID)
	require.Equal(t, transport.ReasonDeliveryMalformed, dead[1].Reason)

	rig.Poll("every healthy request acknowledged", func() bool {
		depth, err := q.Depth(t.Context())
		require.NoError(t, err)
		return len(depth) == 1 && depth[0] == pgqueue.TopicDepth{Topic: transport.TopicRefundRequests, Dead: 2}
	})
}

// An outage of the ledger's store is not the message's fault: however many
// times it comes back Retry with eventstore.ErrUnavailable (more than
// MaxAttempts here), it is not dead-lettered, and once the store is back
// the refund happens once.
func TestOutageIsNotCountedAgainstTheMessage(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) {
		c.MaxAttempts, c.RetryBackoff, c.MaxRetryBackoff, c.MaxOutageBackoff = 2, time.Millisecond, 5*time.Millisecond, 5*time.Millisecond
	})
	rig.Approve("OP-1")
	relay := rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil)
	rig.Go("relay", relay.Run)
	dispatch := rig.Handler("w1")
	var (
		mu      sync.Mutex
		outages = 5
	)
	handle := func(ctx context.Context, in transport.Inbound) transport.Disposition {
		mu.Lock()
		down := outages > 0
		outages--
		mu.Unlock()
		if down {
			return transport.Disposition{Action: transport.ActionRetry, Err: eventstore.Unavailable("append", context.DeadlineExceeded)}
		}
		return dispatch(ctx, in)
	}
	rig.Go("consume", func(ctx context.Context) error { return q.Consume(ctx, handle) })
	rig.WaitRecords("the claim after the outage", 1, transporttest.Status(domain.StatusClaimed))
	rig.Once("OP-1")
	rig.Poll("acknowledged", func() bool {
		msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.NotEqual(t, "dead", msgs[0].State)
		return msgs[0].State == "acked" && msgs[0].Attempts == 6
	})
	dead, err := q.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, dead)
}

// A batch claim hands out at most one message per key, the oldest, across
// many keys; the next of a key follows only once the one before is settled,
// whatever the outcome (acknowledged, or dead-lettered after its attempts).
func TestBatchClaimKeepsOrderPerKey(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", func(c *pgqueue.Config) { c.MaxAttempts, c.RetryBackoff = 1, time.Millisecond })
	var msgs []transport.Outbound
	for i := range 3 {
		for _, key := range []string{"OP-A", "OP-B", "OP-C"} {
			msgs = append(msgs, transport.Outbound{Topic: transport.TopicRefundRequests, Key: key, MessageID: key + "-" + string(rune('1'+i)), Value: []byte("{}")})
		}
	}
	require.NoError(t, q.Publish(t.Context(), msgs))
	for round := 1; round <= 3; round++ {
		got, err := q.Claim(t.Context(), "w1", 10)
		require.NoError(t, err)
		var ids []string
		for _, c := range got {
			ids = append(ids, c.MessageID)
		}
		want := []string{"OP-A-" + string(rune('0'+round)), "OP-B-" + string(rune('0'+round)), "OP-C-" + string(rune('0'+round))}
		require.Equal(t, want, ids, "round %d", round)
		again, err := q.Claim(t.Context(), "w2", 10)
		require.NoError(t, err)
		require.Empty(t, again, "round %d: every key has a message in flight", round)
		for _, c := range got {
			d := transport.Disposition{Action: transport.ActionAck}
			if strings.HasPrefix(c.MessageID, "OP-B") {
				d = transport.Disposition{Action: transport.ActionRetry, Err: context.DeadlineExceeded} // fails; MaxAttempts 1: dead
			}
			require.NoError(t, q.Settle(t.Context(), c, d))
		}
	}
	dead, err := q.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, dead, 3)
	for _, dl := range dead {
		require.True(t, strings.HasPrefix(dl.MessageID.String(), "OP-B"))
		require.Equal(t, "1", dl.Headers[transport.HeaderDeadAttempts])
	}
}

// The relay on PostgreSQL: an event it cannot turn into a message (a
// CapabilityIssued no build can decode) among healthy ones is retried up to
// its policy's bound, then set aside in the transport schema's set-aside
// table with its reason, and the healthy requests around it reach the
// queue.
func TestRelaySetsAsideAPoisonedEvent(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	q := newQueue(t, rig, "w1", nil)
	rig.Approve("OP-1")
	bad := uuid.NewString()
	_, err := rig.Store.Append(t.Context(), domain.OperationID("OP-BAD").StreamName(), eventstore.Any(), []eventstore.EventData{{
		ID: bad, Type: domain.TypeCapabilityIssued, Data: []byte(`{"unexpected_field":true}`), Metadata: []byte(`{}`),
	}})
	require.NoError(t, err)
	rig.Approve("OP-2")
	relay := rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil)
	rig.Go("relay", relay.Run)

	rig.Poll("both healthy requests in the queue", func() bool {
		msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
		require.NoError(t, err)
		return len(msgs) == 2
	})
	msgs, err := q.ListTopic(t.Context(), transport.TopicRefundRequests, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"OP-1", "OP-2"}, []string{msgs[0].Key, msgs[1].Key})
	it, ok, err := rig.SetAside.Get(t.Context(), setaside.RoleRelay, transport.RelayRefundRequests+":"+bad)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, it.SetAside)
	require.Equal(t, 3, it.Attempts, "the rig's relay policy: three attempts")
	require.Equal(t, transport.ReasonRelaySelectFailed, it.Reason)
	require.Equal(t, domain.OperationID("OP-BAD"), it.OperationID)
	counts, err := rig.SetAside.Counts(t.Context())
	require.NoError(t, err)
	require.Equal(t, []setaside.Count{{Role: setaside.RoleRelay, SetAside: 1}}, counts)
	require.Equal(t, int64(1), relay.Status().SetAside)
}
