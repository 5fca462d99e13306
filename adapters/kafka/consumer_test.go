package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
	"opledger/eventstore"
)

// The relay publishes a request per capability; a consumer handles them and
// commits; after a stop, a new member of the group resumes from the
// committed offsets: it sees only what came after, and every refund happens
// once on the provider's ledger.
func TestConsumerRestartResumesFromCommittedOffset(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	rig.Go("relay", rig.Relay("refund-requests", publisher(t, brokers), transport.SelectRefundRequests, nil).Run)

	first := []domain.OperationID{"OP-1", "OP-2", "OP-3"}
	for _, op := range first {
		rig.Approve(op)
	}
	stop := consume(rig, brokers, "w1")
	rig.WaitRecords("the first claims", len(first), transporttest.Status(domain.StatusClaimed))
	stop() // graceful: what was handled is committed before the member leaves

	later := []domain.OperationID{"OP-4", "OP-5"}
	for _, op := range later {
		rig.Approve(op)
	}
	consume(rig, brokers, "w2")
	rig.WaitRecords("the later claims", len(later), func(r transporttest.Record) bool {
		return r.Worker == "w2" && transporttest.Status(domain.StatusClaimed)(r)
	})
	var seen []domain.OperationID
	for _, r := range rig.Find(func(r transporttest.Record) bool { return r.Worker == "w2" }) {
		seen = append(seen, r.OperationID)
	}
	slices.Sort(seen)
	require.Equal(t, later, seen, "w2 resumed after the committed offsets: nothing handled twice")
	for _, op := range append(first, later...) {
		rig.Once(op)
	}
}

// A rebalance between two members of one group (one joins mid-stream, then
// the other leaves) loses nothing and refunds nothing twice.
func TestRebalanceLosesNothingRefundsNothingTwice(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	rig.Go("relay", rig.Relay("refund-requests", publisher(t, brokers), transport.SelectRefundRequests, nil).Run)

	// Three waves of operations, two per partition each.
	waves := make([][]domain.OperationID, 3)
	perPartition := make([][]int, 3)
	for i := 0; ; i++ {
		op := domain.OperationID(fmt.Sprintf("OP-%d", 1000+i))
		p := partitionOf(string(op))
		placed := false
		for w := range waves {
			if perPartition[w] == nil {
				perPartition[w] = make([]int, partitions)
			}
			if perPartition[w][p] < 2 {
				perPartition[w][p]++
				waves[w] = append(waves[w], op)
				placed = true
				break
			}
		}
		if !placed && len(waves[2]) == 2*partitions {
			break
		}
		require.Less(t, i, 10_000, "the hash balancer spreads keys")
	}
	claimedOps := func() map[domain.OperationID]int {
		n := map[domain.OperationID]int{}
		for _, r := range rig.Find(transporttest.Status(domain.StatusClaimed)) {
			n[r.OperationID]++
		}
		return n
	}

	for _, op := range waves[0] {
		rig.Approve(op)
	}
	stopW1 := consume(rig, brokers, "w1")
	rig.WaitRecords("w1 working", 1, transporttest.Status(domain.StatusClaimed))
	consume(rig, brokers, "w2") // joins: the group rebalances
	for _, op := range waves[1] {
		rig.Approve(op)
	}
	rig.WaitRecords("waves 1 and 2", len(waves[0])+len(waves[1]), transporttest.Status(domain.StatusClaimed))
	stopW1() // leaves: w2 takes every partition
	for _, op := range waves[2] {
		rig.Approve(op)
	}
	rig.WaitRecords("all waves", len(waves[0])+len(waves[1])+len(waves[2]), transporttest.Status(domain.StatusClaimed))

	byOp := claimedOps()
	for _, wave := range waves {
		for _, op := range wave {
			require.Equal(t, 1, byOp[op], "%s claimed once", op)
			rig.Once(op)
		}
	}
	for _, w := range []string{"w1", "w2"} {
		require.NotEmpty(t, rig.Find(func(r transporttest.Record) bool {
			return r.Worker == w && transporttest.Status(domain.StatusClaimed)(r)
		}), "%s handled a share", w)
	}
	// Whatever a rebalance redelivered was absorbed by the inbox.
	for _, r := range rig.Records() {
		require.Contains(t, []domain.ClaimStatus{domain.StatusClaimed, domain.StatusDuplicateDelivery}, r.Disposition.Result.Claim.Status)
	}
}

// A slow provider call holds up only its own partition: while one
// operation's response is held, the other partitions' refunds complete, and
// the message behind it in its partition waits its turn (order per
// partition); one message per partition is in flight.
func TestSlowProviderCallBlocksOnlyItsPartition(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	// OP-SLOW and OP-NEXT share a partition; one operation on every other.
	slow, next := domain.OperationID("OP-SLOW"), domain.OperationID("")
	others := map[int]domain.OperationID{}
	for i := 0; next == "" || len(others) < partitions-1; i++ {
		require.Less(t, i, 10_000)
		op := domain.OperationID(fmt.Sprintf("OP-%d", i))
		switch p := partitionOf(string(op)); {
		case p == partitionOf(string(slow)):
			if next == "" {
				next = op
			}
		case others[p] == "":
			others[p] = op
		}
	}
	require.NoError(t, rig.World.Sim.Arm(sim.Fault{Kind: sim.FaultHoldResponse, OperationID: string(slow)}))
	rig.Approve(slow)
	rig.Approve(next)
	for _, op := range others {
		rig.Approve(op)
	}
	rig.Go("relay", rig.Relay("refund-requests", publisher(t, brokers), transport.SelectRefundRequests, nil).Run)
	consume(rig, brokers, "w1")

	select {
	case <-rig.World.Sim.Held():
	case <-t.Context().Done():
		t.Fatal("the slow call never reached the provider")
	}
	rig.WaitRecords("the other partitions", len(others), func(r transporttest.Record) bool {
		return transporttest.Status(domain.StatusClaimed)(r) && r.OperationID != slow && r.OperationID != next
	})
	require.Empty(t, rig.Find(func(r transporttest.Record) bool { return r.OperationID == next || r.OperationID == slow }),
		"the slow partition is still on its first message")
	require.Zero(t, rig.Counters(next).RequestsReceived)

	rig.World.Sim.Release()
	rig.WaitRecords("the slow partition", 2, func(r transporttest.Record) bool {
		return transporttest.Status(domain.StatusClaimed)(r) && (r.OperationID == next || r.OperationID == slow)
	})
	for _, op := range append([]domain.OperationID{slow, next}, slices.Collect(maps.Values(others))...) {
		rig.Once(op)
	}
}

// The offset is committed only after the ledger recorded the result: a
// message whose result could not be recorded (Retry) is handled again in
// place, and the broker sees a commit only after the recorded attempt.
func TestCommitOnlyAfterTheResultIsRecorded(t *testing.T) {
	t.Parallel()
	c, brokers := cluster(t)
	rig := transporttest.New(t)
	var (
		mu     sync.Mutex
		events []string
	)
	note := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.OffsetCommitRequest).Topics {
			for _, p := range tp.Partitions {
				note(fmt.Sprintf("commit %s/%d@%d", tp.Topic, p.Partition, p.Offset))
			}
		}
		return nil, nil, false // observe only: the broker handles it
	})
	rig.Go("relay", rig.Relay("refund-requests", publisher(t, brokers), transport.SelectRefundRequests, nil).Run)
	rig.Approve("OP-1")
	dispatch := rig.Handler("w1")
	retried := false
	handle := func(ctx context.Context, in transport.Inbound) transport.Disposition {
		if !retried { // the store is down for the first attempt: nothing recorded
			retried = true
			note("retry")
			return transport.Disposition{Action: transport.ActionRetry, Err: eventstore.ErrUnavailable}
		}
		d := dispatch(ctx, in)
		note("recorded " + string(d.Result.Claim.Status))
		return d
	}
	member := consumer(t, brokers, "w1", rig.SetAside)
	rig.Go("consumer", func(ctx context.Context) error { return member.Consume(ctx, handle) })
	claimed := rig.WaitRecords("the claim", 1, transporttest.Status(domain.StatusClaimed))
	want := []string{"retry", "recorded Claimed", fmt.Sprintf("commit %s/%d@1", transport.TopicRefundRequests, claimed[0].Origin.Partition)}
	rig.Poll("the commit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) >= len(want)
	})
	mu.Lock()
	require.Equal(t, want, events)
	mu.Unlock()
	rig.Once("OP-1")
}

// A relay whose brokers cannot be reached (serve --kafka-brokers
// 127.0.0.1:9) says so in its status, idle or not, and keeps trying: the
// readiness check reports it instead of answering ready.
func TestRelayReportsUnreachableBrokers(t *testing.T) {
	t.Parallel()
	rig := transporttest.New(t)
	relay := rig.RelayWith(transport.RelayRefundRequests, publisher(t, []string{"127.0.0.1:9"}), transport.SelectRefundRequests, nil,
		func(c *transport.RelayConfig) { c.MaxFailures = 0; c.PingInterval = 10 * time.Millisecond })
	rig.Go("relay", relay.Run)
	rig.Poll("the idle relay reporting the brokers unreachable", func() bool { return relay.Status().Failing })
	st := relay.Status()
	require.Equal(t, transport.StagePublish, st.Stage)
	require.ErrorContains(t, st.Problem(), "unreachable")

	rig.Approve("OP-1")
	rig.Poll("a failed publication", func() bool {
		st := relay.Status()
		return st.Failing && strings.HasPrefix(st.Err, "publish 1 messages")
	})
	require.Zero(t, relay.Published())
	require.True(t, relay.Status().Leader)
}
