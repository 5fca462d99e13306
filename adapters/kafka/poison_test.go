package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"opledger/adapters/kafka"
	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

const poisoned = domain.OperationID("OP-POISON")

// poisonedPartition is one poisoned operation between two healthy ones on
// its partition, and one healthy operation on every other partition.
type poisonedPartition struct {
	before, after domain.OperationID
	others        []domain.OperationID
}

func (p poisonedPartition) healthy() []domain.OperationID {
	return append([]domain.OperationID{p.before, p.after}, p.others...)
}

// setUpPoison approves the operations in log order (before, the poison,
// after, the others), corrupts the poison's stream and starts the relay.
func setUpPoison(t *testing.T, rig *transporttest.Rig, brokers []string) poisonedPartition {
	t.Helper()
	var p poisonedPartition
	taken := map[int]bool{partitionOf(string(poisoned)): true}
	for i := 0; p.before == "" || p.after == "" || len(p.others) < partitions-1; i++ {
		require.Less(t, i, 10_000, "the hash balancer spreads keys")
		op := domain.OperationID(fmt.Sprintf("OP-%d", i))
		switch part := partitionOf(string(op)); {
		case part == partitionOf(string(poisoned)) && p.before == "":
			p.before = op
		case part == partitionOf(string(poisoned)) && p.after == "":
			p.after = op
		case !taken[part]:
			taken[part] = true
			p.others = append(p.others, op)
		}
	}
	rig.Approve(p.before)
	rig.Approve(poisoned)
	rig.Corrupt(poisoned)
	rig.Approve(p.after)
	for _, op := range p.others {
		rig.Approve(op)
	}
	rig.Go("relay", rig.Relay(transport.RelayRefundRequests, publisher(t, brokers), transport.SelectRefundRequests, nil).Run)
	return p
}

func policy(attempts int, backoff time.Duration) func(*kafka.ConsumerConfig) {
	return func(c *kafka.ConsumerConfig) {
		c.Policy = setaside.Policy{MaxAttempts: attempts, Backoff: backoff, MaxBackoff: backoff}
	}
}

func isPoison(r transporttest.Record) bool { return r.OperationID == poisoned }

func by(worker string, match func(transporttest.Record) bool) func(transporttest.Record) bool {
	return func(r transporttest.Record) bool { return r.Worker == worker && match(r) }
}

// deadLetters waits for n messages on the dead-letter topic and returns them.
func deadLetters(t *testing.T, rig *transporttest.Rig, brokers []string, n int) []kafkago.Message {
	t.Helper()
	var got []kafkago.Message
	rig.Poll(fmt.Sprintf("%d dead letters", n), func() bool {
		got = topic(t, brokers, transport.TopicDeadLetters)
		return len(got) >= n
	})
	require.Len(t, got, n)
	return got
}

// requireExhausted checks the poison's dead letter: its reason, attempts,
// last error and origin, with the request itself as the value.
func requireExhausted(t *testing.T, dl kafkago.Message, attempts int, origin transport.Origin) {
	t.Helper()
	require.Equal(t, string(transport.ReasonDeliveryAttemptsExhausted), header(dl, transport.HeaderDeadReason))
	require.Equal(t, strconv.Itoa(attempts), header(dl, transport.HeaderDeadAttempts))
	require.Contains(t, header(dl, transport.HeaderDeadDetail), fmt.Sprintf("failed %d times", attempts))
	require.Contains(t, header(dl, transport.HeaderDeadDetail), "corrupt")
	require.Equal(t, strconv.Itoa(origin.Partition), header(dl, transport.HeaderOriginalPart))
	require.Equal(t, strconv.FormatInt(origin.Offset, 10), header(dl, transport.HeaderOriginalOffset))
	req, err := transport.DecodeRefundRequest(dl.Value)
	require.NoError(t, err)
	require.Equal(t, poisoned, req.OperationID)
}

// requireCleared checks that the poison's attempt count was cleared once its
// dead letter was written and committed.
func requireCleared(t *testing.T, rig *transporttest.Rig, origin transport.Origin) {
	t.Helper()
	rig.Poll("the attempt count cleared", func() bool {
		_, ok, err := rig.SetAside.Get(t.Context(), setaside.RoleKafka, itemOf(origin))
		require.NoError(t, err)
		return !ok
	})
}

func itemOf(o transport.Origin) string {
	return fmt.Sprintf("workers/%s/%d@%d", o.Topic, o.Partition, o.Offset)
}

// One poisoned message among healthy ones on the same partition (its
// operation's stream cannot be loaded: neither bad input nor an outage): it
// is retried MaxAttempts times with a back-off, its partition waiting, then
// dead-lettered with its reason and attempt count; the offset is committed
// and the healthy message behind it is handled. Every healthy refund
// happens once on the provider's ledger; the poison reaches no provider.
func TestPoisonedMessageIsDeadLetteredAndItsPartitionMovesOn(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	p := setUpPoison(t, rig, brokers)
	member := consumer(t, brokers, "w1", rig.SetAside, policy(4, 20*time.Millisecond))
	rig.Go("consumer", func(ctx context.Context) error { return member.Consume(ctx, rig.Handler("w1")) })

	rig.WaitRecords("every healthy claim", len(p.healthy()), transporttest.Status(domain.StatusClaimed))
	for _, op := range p.healthy() {
		rig.Once(op)
	}
	require.Equal(t, sim.Counters{}, rig.Counters(poisoned))
	records := rig.Records()
	var poison []int
	after := -1
	for i, r := range records {
		switch r.OperationID {
		case poisoned:
			poison = append(poison, i)
			require.Equal(t, transport.ActionRetry, r.Disposition.Action)
			require.ErrorContains(t, r.Disposition.Err, "corrupt")
		case p.after:
			after = i
		}
	}
	require.Len(t, poison, 4, "attempted MaxAttempts times, no more")
	require.Greater(t, after, poison[len(poison)-1], "the message behind the poison waited for it (order per partition)")

	origin := records[poison[0]].Origin
	requireExhausted(t, deadLetters(t, rig, brokers, 1)[0], 4, origin)
	requireCleared(t, rig, origin)
	rig.Poll("the stats", func() bool { return member.Stats().Exhausted == 1 })
	st := member.Stats()
	require.Equal(t, kafka.ConsumerStats{DeadLettered: 1, Exhausted: 1, Failures: 4}, st)
}

// gate hands the poison to worker's dispatcher for its first real
// attempts, and afterwards answers as if the store were down (an outage:
// not counted), so the member keeps the partition busy without counting
// until it stops or loses the partition. spinning closes at the first such
// answer.
func gate(rig *transporttest.Rig, worker string, real int) (h transport.HandleFunc, spinning <-chan struct{}) {
	dispatch := rig.Handler(worker)
	var (
		mu   sync.Mutex
		n    int
		once sync.Once
	)
	spin := make(chan struct{})
	return func(ctx context.Context, in transport.Inbound) transport.Disposition {
		if req, _ := transport.DecodeRefundRequest(in.Value); req.OperationID == poisoned {
			mu.Lock()
			n++
			over := n > real
			mu.Unlock()
			if over {
				once.Do(func() { close(spin) })
				return transport.Disposition{Action: transport.ActionRetry, Err: eventstore.Unavailable("claim", errors.New("test: the store is down"))}
			}
		}
		return dispatch(ctx, in)
	}, spin
}

// A member stopped in the middle of a poisoned message's retries, and a new
// member started after it: the new member continues the count where the
// first left it (stored in the set-aside store), so the message is
// dead-lettered after MaxAttempts attempts in all, not MaxAttempts more.
// The first member's outage retries were not counted.
func TestAttemptCountSurvivesARestart(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	p := setUpPoison(t, rig, brokers)
	h1, spinning := gate(rig, "w1", 2)
	first := consumer(t, brokers, "w1", rig.SetAside, policy(5, 20*time.Millisecond))
	stop := rig.Go("first member", func(ctx context.Context) error { return first.Consume(ctx, h1) })
	<-spinning
	stop()

	failed := rig.Find(by("w1", isPoison))
	require.Len(t, failed, 2)
	it, ok, err := rig.SetAside.Get(t.Context(), setaside.RoleKafka, itemOf(failed[0].Origin))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, it.Attempts, "two failures counted; the outage retries were not")
	require.False(t, it.SetAside)
	require.Positive(t, first.Stats().Outages)
	require.Empty(t, rig.Find(by("w1", func(r transporttest.Record) bool { return r.OperationID == p.after })), "the partition waited")

	consume(rig, brokers, "w2", policy(5, 20*time.Millisecond))
	rig.WaitRecords("the message behind the poison", 1, by("w2", func(r transporttest.Record) bool {
		return r.OperationID == p.after && transporttest.Status(domain.StatusClaimed)(r)
	}))
	require.Len(t, rig.Find(by("w2", isPoison)), 3, "the second member went on from two, to five")
	requireExhausted(t, deadLetters(t, rig, brokers, 1)[0], 5, failed[0].Origin)
	requireCleared(t, rig, failed[0].Origin)
	for _, op := range p.healthy() {
		rig.Once(op)
	}
}

// generations returns a logger that reports, for each generation the
// consumer starts, how many partitions it was assigned.
func generations() (*slog.Logger, <-chan int) {
	ch := make(chan int, 64)
	return slog.New(&generationHandler{ch: ch}), ch
}

type generationHandler struct{ ch chan int }

func (h *generationHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *generationHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *generationHandler) WithGroup(string) slog.Handler            { return h }
func (h *generationHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "generation started" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "partitions" {
			select {
			case h.ch <- int(a.Value.Int64()):
			default: // the test reads the first few only
			}
		}
		return true
	})
	return nil
}

// A rebalance that moves a poisoned message's partition to another running
// member keeps the count: a second member joins while the first retries the
// message, the first leaves, and the second dead-letters it after
// MaxAttempts attempts in all.
func TestAttemptCountSurvivesARebalance(t *testing.T) {
	t.Parallel()
	_, brokers := cluster(t)
	rig := transporttest.New(t)
	p := setUpPoison(t, rig, brokers)
	h1, spinning := gate(rig, "w1", 2)
	first := consumer(t, brokers, "w1", rig.SetAside, policy(5, 20*time.Millisecond))
	stopFirst := rig.Go("first member", func(ctx context.Context) error { return first.Consume(ctx, h1) })
	<-spinning

	log, gens := generations()
	second := consumer(t, brokers, "w2", rig.SetAside, policy(5, 20*time.Millisecond), func(c *kafka.ConsumerConfig) { c.Logger = log })
	h2 := rig.Handler("w2")
	rig.Go("second member", func(ctx context.Context) error { return second.Consume(ctx, h2) })
	select {
	case n := <-gens: // the join's rebalance: both members share the partitions
		require.Positive(t, n)
	case <-time.After(transporttest.WaitTimeout):
		t.Fatal("the second member never joined")
	}
	stopFirst() // the leave's rebalance: every partition moves to the second

	rig.WaitRecords("the message behind the poison", 1, by("w2", func(r transporttest.Record) bool {
		return r.OperationID == p.after && transporttest.Status(domain.StatusClaimed)(r)
	}))
	failed := rig.Find(isPoison)
	require.Len(t, rig.Find(by("w1", isPoison)), 2)
	require.Len(t, failed, 5, "five attempts in all, across the rebalance")
	requireExhausted(t, deadLetters(t, rig, brokers, 1)[0], 5, failed[0].Origin)
	requireCleared(t, rig, failed[0].Origin)
	for _, op := range p.healthy() {
		rig.Once(op)
	}
}
