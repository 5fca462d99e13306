package pgqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// benchMessages is the backlog one iteration drains.
const benchMessages = 300

// BenchmarkRelayPostgresWorkerLedger measures messages/s from the log through
// the relay, the Postgres queue (4 claimers, SKIP LOCKED) and the worker to
// the ledger, with a zero-latency provider simulator: a backlog of
// benchMessages approved refunds is drained per iteration. Not run by
// default:
//
//	go test -run '^$' -bench RelayPostgres -count 5 ./adapters/pgqueue/
func BenchmarkRelayPostgresWorkerLedger(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rig := transporttest.New(b)
		for n := range benchMessages {
			rig.Approve(domain.OperationID(fmt.Sprintf("OP-%d-%d", i, n)))
		}
		q, err := pgqueue.New(pgqueue.Config{DB: rig.Pool, Schema: rig.Schema, WorkerID: "w1", Concurrency: 4,
			PollMin: time.Millisecond, PollMax: 20 * time.Millisecond, Logger: rig.World.Logger})
		require.NoError(b, err)
		h := rig.Handler("w1")
		relay := rig.Relay(transport.RelayRefundRequests, q, transport.SelectRefundRequests, nil)
		b.StartTimer()
		start := time.Now()
		stopRelay := rig.Go("relay", relay.Run)
		stopConsumer := rig.Go("consumer", func(ctx context.Context) error { return q.Consume(ctx, h) })
		rig.WaitRecords("the backlog", benchMessages, transporttest.Status(domain.StatusClaimed))
		total += time.Since(start)
		b.StopTimer()
		stopConsumer()
		stopRelay()
	}
	b.ReportMetric(float64(b.N*benchMessages)/total.Seconds(), "msgs/s")
}

// BenchmarkWorkerWithoutTransport is the baseline for the two transport
// benchmarks: the same backlog handed straight to the dispatcher by 4
// goroutines, no relay and no transport.
func BenchmarkWorkerWithoutTransport(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rig := transporttest.New(b)
		work := make(chan transport.Inbound, benchMessages)
		for n := range benchMessages {
			ref := rig.Approve(domain.OperationID(fmt.Sprintf("OP-%d-%d", i, n)))
			v, err := transport.RefundRequest{MessageID: domain.MessageID(fmt.Sprintf("MSG-%d", n)), OperationID: ref.Operation, CapabilityID: ref.Capability}.Encode()
			require.NoError(b, err)
			work <- transport.Inbound{Value: v}
		}
		close(work)
		h := rig.Handler("w1")
		b.StartTimer()
		start := time.Now()
		done := make(chan struct{})
		for range 4 {
			go func() {
				defer func() { done <- struct{}{} }()
				for in := range work {
					h(b.Context(), in)
				}
			}()
		}
		for range 4 {
			<-done
		}
		total += time.Since(start)
		b.StopTimer()
		require.Len(b, rig.Find(transporttest.Status(domain.StatusClaimed)), benchMessages)
	}
	b.ReportMetric(float64(b.N*benchMessages)/total.Seconds(), "msgs/s")
}
