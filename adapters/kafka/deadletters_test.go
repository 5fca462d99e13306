package kafka_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// Poison messages (undecodable; a malformed id; an unknown operation) land in
// the dead-letter topic with their reason and origin in headers, are
// recorded as evidence, and the next message of the same partition is still
// processed.
func TestPoisonMessagesGoToTheDeadLetterTopic(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	pub := publisher(t, brokers)
	badID, err := transport.RefundRequest{MessageID: "MSG-BAD", OperationID: "OP-1", CapabilityID: "CAP-"}.Encode()
	require.NoError(t, err)
	unknown, err := transport.RefundRequest{MessageID: "MSG-NOWHERE", OperationID: "OP-404", CapabilityID: "CAP-X"}.Encode()
	require.NoError(t, err)
	// Same key as the good request: same partition, ahead of it.
	require.NoError(t, pub.Publish(t.Context(), []transport.Outbound{
		{Topic: transport.TopicRefundRequests, Key: "OP-1", Value: []byte("\x00garbage")},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "MSG-BAD", Value: badID},
		{Topic: transport.TopicRefundRequests, Key: "OP-1", MessageID: "MSG-NOWHERE", Value: unknown},
	}))
	rig.Approve("OP-1")
	rig.Go("relay", rig.Relay("refund-requests", pub, transport.SelectRefundRequests, nil).Run)
	consume(rig, brokers, "w1")

	good := rig.WaitRecords("the good request", 1, status(domain.StatusClaimed))
	once(t, rig, "OP-1")
	rig.Poll("three dead letters", func() bool { return len(topic(t, brokers, transport.TopicDeadLetters)) == 3 })
	dead := topic(t, brokers, transport.TopicDeadLetters)
	wantReasons := []string{string(transport.ReasonDeliveryMalformed), string(transport.ReasonDeliveryMalformed), string(domain.ReasonOperationUnknown)}
	for i, m := range dead {
		require.Equal(t, wantReasons[i], header(m, transport.HeaderDeadReason), "dead letter %d", i)
		require.NotEmpty(t, header(m, transport.HeaderDeadDetail))
		require.Equal(t, transport.TopicRefundRequests, header(m, transport.HeaderOriginalTopic))
		require.Equal(t, strconv.Itoa(good[0].Origin.Partition), header(m, transport.HeaderOriginalPart))
		require.Equal(t, strconv.Itoa(i), header(m, transport.HeaderOriginalOffset), "in partition order, before the good one")
		require.Equal(t, "w1", header(m, transport.HeaderDeadLetteredBy))
	}
	require.Equal(t, int64(3), good[0].Origin.Offset)

	evidence := map[domain.Reason]int{}
	for _, ev := range rig.Evidence() {
		require.False(t, ev.ExecutionAttempted)
		evidence[ev.Reason]++
	}
	require.Equal(t, map[domain.Reason]int{transport.ReasonDeliveryMalformed: 2, domain.ReasonOperationUnknown: 1}, evidence)
}

// The seed's Friday case on Kafka: a copy of Thursday's message sits in the
// dead-letter topic (an earlier consumer dead-lettered it on a timeout while
// the refund went through). "resubmit all" republishes it under a new
// message id; the ledger refuses the spent authority (replay suspected), the
// signals relay publishes a security signal, and the provider sees one
// request. A second resubmission of it is refused by the tool.
func TestResubmitSpentAuthorityIsRefusedAndSignalled(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	pub := publisher(t, brokers)
	ref := rig.Approve("OP-4471")
	rig.Go("relay", rig.Relay("refund-requests", pub, transport.SelectRefundRequests, nil).Run)
	rig.Go("signals", rig.Relay("security-signals", pub, transport.SelectSecuritySignals, nil).Run)
	consume(rig, brokers, "w1")
	thursday := rig.WaitRecords("Thursday's claim", 1, status(domain.StatusClaimed))
	once(t, rig, "OP-4471")

	original := topic(t, brokers, transport.TopicRefundRequests)
	require.Len(t, original, 1)
	require.NoError(t, pub.Publish(t.Context(), []transport.Outbound{{
		Topic: transport.TopicDeadLetters, Key: string(original[0].Key), Value: original[0].Value,
		MessageID: string(thursday[0].MessageID),
		Headers: map[string]string{
			transport.HeaderDeadReason: "delivery.timeout", transport.HeaderOriginalTopic: transport.TopicRefundRequests,
			transport.HeaderOriginalPart: strconv.Itoa(original[0].Partition), transport.HeaderOriginalOffset: "0",
		},
	}}))

	log, err := pgqueue.NewResubmissions(rig.Pool, rig.Schema)
	require.NoError(t, err)
	dlq, err := kafka.NewDeadLetters(kafka.DeadLettersConfig{Brokers: brokers, Log: log, Publisher: pub, Logger: rig.World.Logger})
	require.NoError(t, err)
	listed, err := dlq.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	require.Equal(t, thursday[0].MessageID, listed[0].MessageID)
	require.Nil(t, listed[0].Resubmitted)

	// Friday 15:30.
	rs, err := dlq.Resubmit(t.Context(), transport.ResubmitRequest{All: true, By: "operator-1"})
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.NotEqual(t, thursday[0].MessageID, rs[0].MessageID)
	friday := rig.WaitRecords("Friday's copy", 1, status(domain.StatusAlreadyConsumed))
	require.Equal(t, rs[0].MessageID, friday[0].MessageID)
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, friday[0].Disposition.Result.Claim.Reason)
	require.True(t, friday[0].Disposition.Result.Claim.ReplaySuspected)
	require.Equal(t, transport.ActionAck, friday[0].Disposition.Action)
	once(t, rig, "OP-4471")

	rig.Poll("the security signal", func() bool { return len(topic(t, brokers, transport.TopicSecuritySignals)) == 1 })
	sigMsg := topic(t, brokers, transport.TopicSecuritySignals)[0]
	sig, err := transport.DecodeSecuritySignal(sigMsg.Value)
	require.NoError(t, err)
	require.Equal(t, transport.SignalReplaySuspected, sig.Kind)
	require.Equal(t, ref.Capability, sig.CapabilityID)
	require.Equal(t, rs[0].MessageID, sig.MessageID)
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, sig.Reason)
	require.False(t, sig.ExecutionAttempted)
	require.Equal(t, sig.SignalID, header(sigMsg, transport.HeaderMessageID))

	_, err = dlq.Resubmit(t.Context(), transport.ResubmitRequest{IDs: []string{listed[0].ID}, By: "operator-2"})
	require.ErrorIs(t, err, transport.ErrAlreadyResubmitted)
	again, err := dlq.Resubmit(t.Context(), transport.ResubmitRequest{All: true, By: "operator-2"})
	require.NoError(t, err)
	require.Empty(t, again, "resubmit all does not resubmit what was resubmitted")
	listed, err = dlq.ListDeadLetters(t.Context(), 10)
	require.NoError(t, err)
	require.NotNil(t, listed[0].Resubmitted)
	require.Equal(t, "operator-1", listed[0].Resubmitted.By)
}
