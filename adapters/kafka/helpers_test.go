package kafka_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/kafka"
	"opledger/adapters/transport"
	"opledger/adapters/transport/transporttest"
	"opledger/domain/setaside"
)

// partitions of the refund-requests topic in every test cluster.
const partitions = 4

// cluster starts an in-process Kafka (kfake, over TCP on loopback) with the
// transport's topics, and returns its broker addresses.
func cluster(t testing.TB) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.SeedTopics(partitions, transport.TopicRefundRequests),
		kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals),
		kfake.GroupMinSessionTimeout(time.Second),
	)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

func publisher(t testing.TB, brokers []string) *kafka.Publisher {
	t.Helper()
	p, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// consumer is a group member tuned for tests: quick heartbeats (rebalances
// noticed within ~100ms) and short fetch waits (readers close quickly); its
// attempt counts live in sa.
func consumer(t testing.TB, brokers []string, worker string, sa setaside.Store, tune ...func(*kafka.ConsumerConfig)) *kafka.Consumer {
	t.Helper()
	cfg := kafka.ConsumerConfig{
		Brokers: brokers, WorkerID: worker, GroupID: "workers", SetAside: sa,
		HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 3 * time.Second, RebalanceTimeout: 5 * time.Second,
		JoinGroupBackoff: 100 * time.Millisecond, MaxWait: 100 * time.Millisecond,
		RetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	}
	for _, f := range tune {
		f(&cfg)
	}
	c, err := kafka.NewConsumer(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// consume runs worker's consumer on the rig until stop.
func consume(rig *transporttest.Rig, brokers []string, worker string, tune ...func(*kafka.ConsumerConfig)) (stop func()) {
	c := consumer(rig.T, brokers, worker, rig.SetAside, tune...)
	h := rig.Handler(worker)
	return rig.Go("consumer "+worker, func(ctx context.Context) error { return c.Consume(ctx, h) })
}

// topic reads every message of a topic, all partitions, in partition order.
func topic(t *testing.T, brokers []string, name string) []kafkago.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := kafkago.DialContext(ctx, "tcp", brokers[0])
	require.NoError(t, err)
	parts, err := conn.ReadPartitions(name)
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	var out []kafkago.Message
	for _, p := range parts {
		leader, err := kafkago.DialLeader(ctx, "tcp", brokers[0], name, p.ID)
		require.NoError(t, err)
		first, last, err := leader.ReadOffsets()
		require.NoError(t, err)
		require.NoError(t, leader.Close())
		if first == last {
			continue
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: brokers, Topic: name, Partition: p.ID, MaxWait: 100 * time.Millisecond})
		require.NoError(t, r.SetOffset(first))
		for off := first; off < last; off++ {
			m, err := r.FetchMessage(ctx)
			require.NoError(t, err)
			out = append(out, m)
		}
		require.NoError(t, r.Close())
	}
	return out
}

func header(m kafkago.Message, name string) string {
	for _, h := range m.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

// partitionOf is the partition the publisher's balancer (murmur2) gives key.
func partitionOf(key string) int {
	ps := make([]int, partitions)
	for i := range ps {
		ps[i] = i
	}
	return kafkago.Murmur2Balancer{}.Balance(kafkago.Message{Key: []byte(key)}, ps...)
}
