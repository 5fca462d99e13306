package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/transport"
	"opledger/domain/feed"
	"opledger/inbox"
)

// TestRefundsIssuedOverKafka: serve relays the feed to its Kafka topic
// (the in-process broker, kfake, over TCP), the worker takes its refund
// requests from Kafka too, and the example consumer follows the topic in a
// consumer group. The first instance dies after its first entry's
// transaction committed and before its offset did: the second instance of
// the group is handed that entry again — a Duplicate — and the rest once,
// each operation's entries in their order. One row per refund.
func TestRefundsIssuedOverKafka(t *testing.T) {
	t.Parallel()
	require.Equal(t, TopicOperationFeed, transport.TopicOperationFeed)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, transport.TopicRefundRequests, transport.TopicOperationFeed),
		kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	brokers := kc.ListenAddrs()
	s := startSystem(t, "KAFKA_BROKERS="+strings.Join(brokers, ","))
	ops := []string{s.refund("kafka-1", 1_200), s.refund("kafka-2", 3_400)}
	all := waitCompleted(t, s, ops) // over HTTP: how many entries the topic must carry
	c := newConsumer(t, "portal")

	// Instance A: handles its first entry, then dies before committing it.
	crash := errors.New("killed before the commit")
	var firstA feed.Entry
	a := &KafkaFollower{Brokers: brokers, GroupID: "portal", MaxWait: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
		handled:      func(e feed.Entry, _ inbox.Result) { firstA = e },
		beforeCommit: func() error { return crash }}
	ctx, cancel := context.WithTimeout(t.Context(), waitBound)
	defer cancel()
	require.ErrorIs(t, a.Run(ctx, c), crash)
	require.NotEmpty(t, firstA.EventID)

	// Instance B of the same group: from the committed offset, so A's
	// entry again.
	var mu sync.Mutex
	var seen []feed.Entry
	results := map[string]inbox.Result{}
	b := &KafkaFollower{Brokers: brokers, GroupID: "portal", MaxWait: 100 * time.Millisecond, Log: slog.New(slog.DiscardHandler),
		handled: func(e feed.Entry, res inbox.Result) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, e)
			results[e.EventID] = res
		}}
	bctx, stopB := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Run(bctx, c) }()
	deadline := time.Now().Add(waitBound)
	for {
		mu.Lock()
		n := len(results)
		mu.Unlock()
		if n == len(all) {
			break
		}
		require.False(t, time.Now().After(deadline), "instance B handled %d of %d entries", n, len(all))
		time.Sleep(20 * time.Millisecond) // polling interval, bounded above
	}
	stopB()
	require.ErrorIs(t, <-done, context.Canceled)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, inbox.Duplicate, results[firstA.EventID], "A's entry, redelivered, is a Duplicate")
	for _, e := range all {
		res, ok := results[e.EventID]
		require.True(t, ok, "every entry of the feed came over Kafka: %s %s", e.OperationID, e.State)
		if e.EventID != firstA.EventID {
			require.Equal(t, inbox.Handled, res)
		}
	}
	last := map[string]int64{}
	for _, e := range seen {
		v, ok := last[string(e.OperationID)]
		require.True(t, !ok || e.StreamVersion > v, "%s: version %d after %d", e.OperationID, e.StreamVersion, v)
		last[string(e.OperationID)] = e.StreamVersion
	}
	requireRows(t, c, ops)
}
