package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// benchMessages is the backlog one iteration drains.
const benchMessages = 300

// BenchmarkRelayKafkaWorkerLedger measures messages/s from the log through
// the relay, Kafka (kfake over loopback TCP, 4 partitions), one consumer
// (one goroutine per partition) and the worker to the ledger, with a
// zero-latency provider simulator: a backlog of benchMessages approved
// refunds is drained per iteration. Not run by default:
//
//	go test -run '^$' -bench RelayKafka -count 5 ./adapters/kafka/
func BenchmarkRelayKafkaWorkerLedger(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, brokers := cluster(b)
		rig := transporttest.New(b)
		for n := range benchMessages {
			rig.Approve(domain.OperationID(fmt.Sprintf("OP-%d-%d", i, n)))
		}
		c := consumer(b, brokers, "w1", rig.SetAside)
		h := rig.Handler("w1")
		relay := rig.Relay(transport.RelayRefundRequests, publisher(b, brokers), transport.SelectRefundRequests, nil)
		b.StartTimer()
		start := time.Now()
		stopRelay := rig.Go("relay", relay.Run)
		stopConsumer := rig.Go("consumer", func(ctx context.Context) error { return c.Consume(ctx, h) })
		rig.WaitRecords("the backlog", benchMessages, transporttest.Status(domain.StatusClaimed))
		total += time.Since(start)
		b.StopTimer()
		stopConsumer()
		stopRelay()
	}
	b.ReportMetric(float64(b.N*benchMessages)/total.Seconds(), "msgs/s")
}
