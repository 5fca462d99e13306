package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// Kafka passes the transport contract. Its real difference: a topic keeps
// every copy of a message id, and the worker's inbox absorbs the copies.
func TestTransportContract(t *testing.T) {
	t.Parallel()
	transporttest.Run(t, transporttest.Features{OneCopyPerMessageID: false}, newTransport)
}

// newTransport is a kfake cluster of the transport's topics with one
// consumer group; the dead-letter topic's resubmissions are logged in the
// rig's transport schema.
func newTransport(t *testing.T, rig *transporttest.Rig) transporttest.Transport {
	c, brokers := cluster(t)
	pub := publisher(t, brokers)
	log, err := pgqueue.NewResubmissions(rig.Pool, rig.Schema)
	require.NoError(t, err)
	dlq, err := kafka.NewDeadLetters(kafka.DeadLettersConfig{Brokers: brokers, Log: log, Publisher: pub, Logger: rig.World.Logger})
	require.NoError(t, err)
	consume := func(ctx context.Context, worker string, handle transport.HandleFunc) error {
		return consumer(t, brokers, worker, rig.SetAside).Consume(ctx, handle)
	}
	return transporttest.Transport{
		Publisher: pub,
		Consume:   consume,
		Messages: func(name string) []transporttest.Message {
			var out []transporttest.Message
			for _, m := range topic(t, brokers, name) {
				out = append(out, transporttest.Message{ID: header(m, transport.HeaderMessageID), Key: string(m.Key), Value: m.Value})
			}
			return out
		},
		DeadLetters: dlq,
		LoseNextAck: func() {
			c.ControlKey(kmsg.OffsetCommit.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				return nil, fmt.Errorf("commit lost"), true // closes the connection; handled once
			})
		},
		Strand: func(worker string, op domain.OperationID) transporttest.Record {
			h := rig.Handler(worker)
			stop := rig.Go("consumer "+worker, func(ctx context.Context) error { return consume(ctx, worker, h) })
			claimed := rig.WaitRecords("the claim", 1, func(r transporttest.Record) bool {
				return r.Worker == worker && r.OperationID == op && transporttest.Status(domain.StatusClaimed)(r)
			})
			stop() // graceful: the offset is committed before the member leaves
			// An earlier consumer dead-lettered a copy on a timeout while the
			// refund went through.
			original := topic(t, brokers, transport.TopicRefundRequests)
			require.Len(t, original, 1)
			require.NoError(t, pub.Publish(t.Context(), []transport.Outbound{{
				Topic: transport.TopicDeadLetters, Key: string(original[0].Key), Value: original[0].Value,
				MessageID: string(claimed[0].MessageID),
				Headers: map[string]string{
					transport.HeaderDeadReason: "delivery.timeout", transport.HeaderOriginalTopic: transport.TopicRefundRequests,
					transport.HeaderOriginalPart: strconv.Itoa(original[0].Partition), transport.HeaderOriginalOffset: "0",
				},
			}}))
			return claimed[0]
		},
		CheckDeadLetters: func(dead []transport.DeadLetter, good transporttest.Record) {
			// In partition order, before the good request, each naming
			// where it was read.
			for i, dl := range dead {
				require.Equal(t, transport.TopicRefundRequests, dl.Headers[transport.HeaderOriginalTopic])
				require.Equal(t, strconv.Itoa(good.Origin.Partition), dl.Headers[transport.HeaderOriginalPart])
				require.Equal(t, strconv.Itoa(i), dl.Headers[transport.HeaderOriginalOffset], "dead letter %d", i)
			}
			require.Equal(t, int64(3), good.Origin.Offset)
		},
	}
}
