package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/kafka"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
)

// A worker killed without leaving its group (SIGKILL, a lost machine) no
// longer stalls its partitions for kafka-go's 30 s session: with the
// default group timings (the broker's own defaults too: kfake, like Kafka,
// accepts sessions of 6 s and more) the other members take its partitions
// over, and every refund requested after the kill is made, once each, by a
// survivor. The kill cuts the member's every connection and refuses new
// ones, so it neither heartbeats nor leaves, as a dead process would.
func TestKilledWorkerPartitionsResume(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, transport.TopicRefundRequests),
		kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	rig := transporttest.New(t)
	rig.Go("relay", rig.Relay("refund-requests", publisher(t, brokers), transport.SelectRefundRequests, nil).Run)

	members := map[string]*mortal{}
	for _, w := range []string{"w1", "w2", "w3"} {
		m := &mortal{name: w}
		members[w] = m
		m.stop = consume(rig, brokers, w, func(cfg *kafka.ConsumerConfig) {
			cfg.HeartbeatInterval, cfg.SessionTimeout, cfg.RebalanceTimeout = 0, 0, 0 // the defaults under test
			cfg.Dialer = &kafkago.Dialer{ClientID: w, DialFunc: m.dial}
		})
	}
	owners := stableAssignment(t, brokers, len(members))
	victim := owners[0]
	var victimParts []int
	for p, w := range owners {
		if w == victim {
			victimParts = append(victimParts, p)
		}
	}

	wave := func(n int) []domain.OperationID { // two operations per partition
		var ops []domain.OperationID
		per := make([]int, partitions)
		for i := 0; len(ops) < 2*partitions; i++ {
			op := domain.OperationID(fmt.Sprintf("OP-%d-%d", n, i))
			if p := partitionOf(string(op)); per[p] < 2 {
				per[p]++
				ops = append(ops, op)
			}
		}
		return ops
	}
	claimed := func() map[domain.OperationID][]transporttest.Record {
		out := map[domain.OperationID][]transporttest.Record{}
		for _, r := range rig.Find(transporttest.Status(domain.StatusClaimed)) {
			out[r.OperationID] = append(out[r.OperationID], r)
		}
		return out
	}
	before := wave(1)
	for _, op := range before {
		rig.Approve(op)
	}
	rig.WaitRecords("the first wave", len(before), transporttest.Status(domain.StatusClaimed))

	members[victim].kill()
	killed := time.Now()
	after := wave(2)
	for _, op := range after {
		rig.Approve(op)
	}
	// Bounded (transporttest.WaitTimeout, 20 s): the dead worker's
	// partitions move once its session (6 s) lapses; with kafka-go's 30 s
	// session they would not have moved within the bound.
	rig.WaitRecords("every refund requested after the kill", len(before)+len(after), transporttest.Status(domain.StatusClaimed))
	byOp := claimed()
	var lastOnVictimParts time.Duration
	for _, op := range after {
		rs := byOp[op]
		require.Len(t, rs, 1, "%s claimed once, within 25 s of the kill", op)
		require.NotEqual(t, victim, rs[0].Worker, "%s: the dead worker handled nothing", op)
		rig.Once(op)
		for _, p := range victimParts {
			if rs[0].Origin.Partition == p {
				lastOnVictimParts = max(lastOnVictimParts, rs[0].At.Sub(killed))
			}
		}
	}
	for _, op := range before {
		require.Len(t, byOp[op], 1)
		rig.Once(op)
	}
	t.Logf("worker %s killed owning partitions %v; its partitions' refunds were made by the others %s after the kill (defaults: heartbeat %s, session %s, rebalance %s)",
		victim, victimParts, lastOnVictimParts.Round(100*time.Millisecond), kafka.DefaultHeartbeatInterval, kafka.DefaultSessionTimeout, kafka.DefaultRebalanceTimeout)
	for _, r := range rig.Records() {
		require.Contains(t, []domain.ClaimStatus{domain.StatusClaimed, domain.StatusDuplicateDelivery}, r.Disposition.Result.Claim.Status)
	}
}

// mortal is one member's network: kill closes every connection it made
// and refuses new ones, and stops the member, which can then neither
// heartbeat nor leave the group.
type mortal struct {
	name  string
	stop  func()
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
}

func (m *mortal) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return nil, errors.New(m.name + " is dead")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		m.conns = append(m.conns, conn)
	}
	return conn, err
}

func (m *mortal) kill() {
	m.mu.Lock()
	m.dead = true
	for _, c := range m.conns {
		_ = c.Close()
	}
	m.mu.Unlock()
	go m.stop() // returns once the member's goroutines did
}

// stableAssignment waits, bounded, until the group is stable with n
// members each holding partitions of the refund-requests topic, and
// returns each partition's owner (the member's client id).
func stableAssignment(t *testing.T, brokers []string, n int) map[int]string {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 5 * time.Second}
	var owners map[int]string
	require.Eventually(t, func() bool {
		resp, err := client.DescribeGroups(t.Context(), &kafkago.DescribeGroupsRequest{GroupIDs: []string{"workers"}})
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].GroupState != "Stable" || len(resp.Groups[0].Members) != n {
			return false
		}
		owners = map[int]string{}
		for _, m := range resp.Groups[0].Members {
			for _, tp := range m.MemberAssignments.Topics {
				if tp.Topic == transport.TopicRefundRequests {
					for _, p := range tp.Partitions {
						owners[p] = m.ClientID
					}
				}
			}
		}
		return len(owners) == partitions
	}, 30*time.Second, 50*time.Millisecond, "the group is stable with %d members", n)
	return owners
}
