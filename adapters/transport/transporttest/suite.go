package transporttest

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/domain"
)

// Features are a transport's real differences, which the suite asserts
// instead of assuming one way.
type Features struct {
	// OneCopyPerMessageID: the transport keeps one message per message id,
	// so publishing an id again changes nothing (the Postgres queue's
	// unique (topic, message_id)). Without it every copy is delivered and
	// the worker's inbox answers the later ones DuplicateDelivery (Kafka).
	OneCopyPerMessageID bool
}

// Transport is one transport under test, built for one test on its rig
// (NewTransport). The suite drives it through these and asserts on the
// simulator's ledger, the rig's records and what the transport holds.
type Transport struct {
	// Publisher is what the relays publish to.
	Publisher transport.Publisher
	// Consume runs a consumer named worker (a member of one group, a
	// claimer of one queue) with handle until ctx ends.
	Consume func(ctx context.Context, worker string, handle transport.HandleFunc) error
	// Messages returns what topic holds now, in order (each partition in
	// turn on Kafka).
	Messages func(topic string) []Message
	// DeadLetters is the transport's dead-letter queue.
	DeadLetters transport.DeadLetterQueue
	// LoseNextAck makes the next acknowledgement lost: the next message
	// consumed is handled, its result recorded by the ledger, and the
	// transport offers it again (Postgres queue: its worker dies before
	// settling it and the visibility timeout passes; Kafka: the broker
	// drops the offset commit).
	LoseNextAck func()
	// Strand has a consumer named worker handle op's published refund
	// request (the refund happens) and leaves a copy of that request in the
	// dead-letter queue, as a transport can (Postgres queue: the worker
	// dies before acknowledging and the attempts run out; Kafka: an earlier
	// consumer dead-lettered a copy on a timeout). It returns the claim's
	// record; no consumer of it is left running.
	Strand func(worker string, op domain.OperationID) Record
	// Unacknowledged, optional, counts the messages of topic not
	// acknowledged yet (the Postgres queue's rows not acked).
	Unacknowledged func(topic string) int
	// CheckDeadLetters, optional, asserts what only this transport says
	// about the dead letters of bad input (Kafka: the original partition
	// and offset, in partition order, before good).
	CheckDeadLetters func(dead []transport.DeadLetter, good Record)
}

// Message is one message a topic holds.
type Message struct {
	ID    string // the message id (Postgres: the column; Kafka: the header)
	Key   string
	Value []byte
}

// NewTransport builds the transport under test for one test on rig.
type NewTransport func(t *testing.T, rig *Rig) Transport

// Run runs the transport contract (transport.Source, transport.Publisher,
// transport.DeadLetterQueue, with the relay and the worker's inbox) against
// the transport newTransport builds, each case on a fresh rig, in parallel.
// Every transport runs it (adapters/kafka, adapters/pgqueue): a new one
// writes a constructor and its Features, not these cases again.
func Run(t *testing.T, f Features, newTransport NewTransport) {
	cases := []struct {
		name string
		run  func(t *testing.T, f Features, tr Transport, rig *Rig)
	}{
		{"EndToEnd", endToEnd},
		{"RelayCrashAfterPublishIsAbsorbed", relayCrashAfterPublish},
		{"RedeliveryAfterALostAcknowledgementIsDuplicate", redeliveryAfterLostAck},
		{"PoisonMessagesAreDeadLettered", poisonMessages},
		{"ResubmitSpentAuthorityIsRefusedAndSignalled", resubmitSpentAuthority},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rig := New(t)
			c.run(t, f, newTransport(t, rig), rig)
		})
	}
}

// Status matches the records of handled messages whose claim ended s.
func Status(s domain.ClaimStatus) func(Record) bool {
	return func(r Record) bool {
		return r.Disposition.Handled && r.Disposition.Result.Claim.Status == s
	}
}

// Once requires that the provider received one request for op and made
// one refund: the simulator's ledger, not a status flag.
func (r *Rig) Once(op domain.OperationID) {
	r.T.Helper()
	require.Equal(r.T, sim.Counters{RequestsReceived: 1, RefundsCreated: 1}, r.Counters(op), "simulator ledger for %s", op)
}

// consume runs tr's consumer named worker on the rig's recording handler
// until the test ends.
func consume(rig *Rig, tr Transport, worker string) {
	h := rig.Handler(worker)
	rig.Go("consumer "+worker, func(ctx context.Context) error { return tr.Consume(ctx, worker, h) })
}

// The relay publishes a request per capability, a consumer takes them, and
// every refund happens once on the provider's ledger; every request is
// published once and acknowledged.
func endToEnd(t *testing.T, _ Features, tr Transport, rig *Rig) {
	rig.Go("relay", rig.Relay(transport.RelayRefundRequests, tr.Publisher, transport.SelectRefundRequests, nil).Run)
	consume(rig, tr, "w1")
	ops := []domain.OperationID{"OP-1", "OP-2", "OP-3", "OP-4"}
	for _, op := range ops {
		rig.Approve(op)
	}
	rig.WaitRecords("claims", len(ops), Status(domain.StatusClaimed))
	for _, op := range ops {
		rig.Once(op)
		st, err := rig.World.State(t.Context(), op)
		require.NoError(t, err)
		require.Equal(t, domain.ExecCompleted, st.CurrentExecution().State, "%s", op)
	}
	require.Len(t, tr.Messages(transport.TopicRefundRequests), len(ops), "one message per capability")
	if tr.Unacknowledged != nil {
		// The recorder sees a disposition just before the transport settles it.
		rig.Poll("every request acknowledged", func() bool { return tr.Unacknowledged(transport.TopicRefundRequests) == 0 })
	}
}

// A relay that dies after publishing and before saving its checkpoint
// publishes the same message id again (twice here). A transport that keeps
// one copy per id holds one message; one that keeps every copy delivers
// them, and the worker's inbox answers the copies DuplicateDelivery. Either
// way the refund happens once.
func relayCrashAfterPublish(t *testing.T, f Features, tr Transport, rig *Rig) {
	rig.Approve("OP-1")
	pub, checks := CrashAfterPublish(tr.Publisher, rig.Checks, 2)
	relay := rig.Relay(transport.RelayRefundRequests, pub, transport.SelectRefundRequests, checks)
	rig.Go("relay", relay.Run)
	rig.Poll("three publications of the request", func() bool { return relay.Published() >= 3 })
	consume(rig, tr, "w1")

	msgs := tr.Messages(transport.TopicRefundRequests)
	if f.OneCopyPerMessageID {
		rig.WaitRecords("the claim", 1, Status(domain.StatusClaimed))
		require.Len(t, msgs, 1, "one message per id, however often it was published")
	} else {
		rig.WaitRecords("the copies", 2, Status(domain.StatusDuplicateDelivery))
		require.Len(t, msgs, 3, "every publication kept")
		require.Equal(t, msgs[0].ID, msgs[1].ID)
		require.Equal(t, msgs[0].ID, msgs[2].ID)
	}
	require.Len(t, rig.Find(Status(domain.StatusClaimed)), 1)
	rig.Once("OP-1")
}

// An acknowledgement is lost after the ledger recorded the result: the
// transport offers the message again, and the copy is a DuplicateDelivery
// with no second provider request.
func redeliveryAfterLostAck(t *testing.T, _ Features, tr Transport, rig *Rig) {
	rig.Go("relay", rig.Relay(transport.RelayRefundRequests, tr.Publisher, transport.SelectRefundRequests, nil).Run)
	rig.Approve("OP-4471")
	tr.LoseNextAck()
	consume(rig, tr, "w1")

	dup := rig.WaitRecords("the redelivery", 1, Status(domain.StatusDuplicateDelivery))
	claims := rig.Find(Status(domain.StatusClaimed))
	require.Len(t, claims, 1)
	require.Equal(t, claims[0].MessageID, dup[0].MessageID)
	require.Equal(t, claims[0].Origin.Topic, dup[0].Origin.Topic)
	require.Equal(t, claims[0].Origin.Offset, dup[0].Origin.Offset, "the same message")
	require.False(t, dup[0].Disposition.Result.Executed)
	rig.Once("OP-4471")
}

// Bad input never stops a consumer and never disappears: an undecodable
// message, one with a malformed id and one for an unknown operation, on the
// good request's key ahead of it, are dead-lettered with their reason and
// recorded as evidence, and the good request behind them is handled.
func poisonMessages(t *testing.T, _ Features, tr Transport, rig *Rig) {
	badID, err := transport.RefundRequest{MessageID: "MSG-BAD", OperationID: "OP-1", CapabilityID: "not-a-capability"}.Encode()
	require.NoError(t, err)
	unknown, err := transport.RefundRequest{MessageID: "MSG-NOWHERE", OperationID: "OP-404", CapabilityID: "CAP-X"}.Encode()
	require.NoError(t, err)
	require.NoError(t, tr.Publisher.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "junk-1", Value: []byte("\x00{not json")},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "junk-2", Value: badID},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "junk-3", Value: unknown},
	}))
	rig.Approve("OP-1")
	rig.Go("relay", rig.Relay(transport.RelayRefundRequests, tr.Publisher, transport.SelectRefundRequests, nil).Run)
	consume(rig, tr, "w1")

	good := rig.WaitRecords("the good request", 1, Status(domain.StatusClaimed))
	rig.Once("OP-1")
	var dead []transport.DeadLetter
	rig.Poll("three dead letters", func() bool {
		var err error
		dead, err = tr.DeadLetters.ListDeadLetters(t.Context(), 10)
		require.NoError(t, err)
		return len(dead) == 3
	})
	var reasons []string
	for _, dl := range dead {
		reasons = append(reasons, string(dl.Reason))
		require.Equal(t, string(dl.Reason), dl.Headers[transport.HeaderDeadReason])
		require.NotEmpty(t, dl.Detail)
		require.Equal(t, "w1", dl.Headers[transport.HeaderDeadLetteredBy])
	}
	slices.Sort(reasons)
	require.Equal(t, []string{string(transport.ReasonDeliveryMalformed), string(transport.ReasonDeliveryMalformed), string(domain.ReasonOperationUnknown)}, reasons)
	if tr.CheckDeadLetters != nil {
		tr.CheckDeadLetters(dead, good[0])
	}

	evidence := map[domain.Reason]int{}
	for _, ev := range rig.Evidence() {
		require.False(t, ev.ExecutionAttempted)
		evidence[ev.Reason]++
	}
	require.Equal(t, map[domain.Reason]int{transport.ReasonDeliveryMalformed: 2, domain.ReasonOperationUnknown: 1}, evidence)
}

// The seed's Friday case: a copy of Thursday's request sits in the
// dead-letter queue after the refund went through; "resubmit all" sends it
// under a new message id; the ledger refuses the spent authority (replay
// suspected), the refusal is acknowledged, not dead-lettered again, the
// signals relay publishes a security signal, and the provider sees one
// request. The tool refuses to resubmit it a second time.
func resubmitSpentAuthority(t *testing.T, _ Features, tr Transport, rig *Rig) {
	ref := rig.Approve("OP-4471")
	rig.Go("relay", rig.Relay(transport.RelayRefundRequests, tr.Publisher, transport.SelectRefundRequests, nil).Run)
	rig.Go("signals", rig.Relay(transport.RelaySecuritySignals, tr.Publisher, transport.SelectSecuritySignals, nil).Run)
	thursday := tr.Strand("w1", "OP-4471")
	require.Equal(t, domain.StatusClaimed, thursday.Disposition.Result.Claim.Status)
	rig.Once("OP-4471")
	listed, err := tr.DeadLetters.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, thursday.MessageID, listed[0].MessageID)
	require.Nil(t, listed[0].Resubmitted)

	consume(rig, tr, "w2")
	// Friday 15:30: resubmit all.
	rs, err := tr.DeadLetters.Resubmit(t.Context(), transport.ResubmitRequest{All: true, By: "operator-1"})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.NotEqual(t, thursday.MessageID, rs[0].MessageID)
	friday := rig.WaitRecords("Friday's copy", 1, Status(domain.StatusAlreadyConsumed))
	require.Equal(t, rs[0].MessageID, friday[0].MessageID)
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, friday[0].Disposition.Result.Claim.Reason)
	require.True(t, friday[0].Disposition.Result.Claim.ReplaySuspected)
	require.Equal(t, transport.ActionAck, friday[0].Disposition.Action, "a refusal is final: acknowledged, not dead-lettered again")
	rig.Once("OP-4471")

	var signals []Message
	rig.Poll("the security signal", func() bool {
		signals = tr.Messages(transport.TopicSecuritySignals)
		return len(signals) == 1
	})
	sig, err := transport.DecodeSecuritySignal(signals[0].Value)
	require.NoError(t, err)
	require.Equal(t, transport.SignalReplaySuspected, sig.Kind)
	require.Equal(t, ref.Capability, sig.CapabilityID)
	require.Equal(t, rs[0].MessageID, sig.MessageID)
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, sig.Reason)
	require.False(t, sig.ExecutionAttempted)
	require.Equal(t, sig.SignalID, signals[0].ID)

	_, err = tr.DeadLetters.Resubmit(t.Context(), transport.ResubmitRequest{IDs: []string{listed[0].ID}, By: "operator-2"})
	require.ErrorIs(t, err, transport.ErrAlreadyResubmitted)
	again, err := tr.DeadLetters.Resubmit(t.Context(), transport.ResubmitRequest{All: true, By: "operator-2"})
	require.NoError(t, err)
	require.Empty(t, again, "resubmit all does not resubmit what was resubmitted")
	listed, err = tr.DeadLetters.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.NotNil(t, listed[0].Resubmitted)
	require.Equal(t, "operator-1", listed[0].Resubmitted.By)
	require.Equal(t, rs[0].MessageID, listed[0].Resubmitted.MessageID)
}
