package transport_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/feed"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
)

// With OperationFeed the standard relays include the operation feed: one
// message per feed entry on its topic, keyed by operation, under the
// event's id, with the entry as GET /v1/feed answers it, under a
// checkpoint of its own. A relay that resumes past an operation's first
// event still sends its amount and references (read from the stream).
func TestOperationFeedRelay(t *testing.T) {
	t.Parallel()
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	approve(t, h, "OP-1")
	approve(t, h, "OP-2")
	first, err := store.ReadAll(t.Context(), nil, 1)
	require.NoError(t, err)
	reader, err := feed.NewReader(feed.ReaderConfig{Store: store})
	require.NoError(t, err)
	want, err := reader.Read(t.Context(), first[0].Position, feed.MaxPage) // OP-1's request is behind the checkpoint
	require.NoError(t, err)
	require.Len(t, want.Entries, 3) // OP-1 authorized; OP-2 requested, authorized

	checks := &memCheckpoints{pos: map[string]string{transport.RelayOperationFeed: first[0].Position.String()}}
	pub := &memPublisher{}
	relays, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: pub, OperationFeed: true,
		Tune: func(c *transport.RelayConfig) { c.PollMax = 10 * time.Millisecond }})
	require.NoError(t, err)
	require.Len(t, relays, 3)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, len(relays))
	for _, r := range relays {
		go func() { done <- r.Run(ctx) }()
	}
	feedOut := func() []transport.Outbound {
		return slices.DeleteFunc(pub.messages(), func(o transport.Outbound) bool { return o.Topic != transport.TopicOperationFeed })
	}
	deadline := time.Now().Add(10 * time.Second)
	saved := func(name string) string { pos, _ := checks.Load(t.Context(), name); return pos }
	for len(feedOut()) < len(want.Entries) || saved(transport.RelayOperationFeed) == first[0].Position.String() {
		require.True(t, time.Now().Before(deadline), "the feed relay published %d", len(feedOut()))
		time.Sleep(time.Millisecond) // polling with a bound
	}
	cancel()
	for range relays {
		require.ErrorIs(t, <-done, context.Canceled)
	}
	got := feedOut()
	require.Len(t, got, len(want.Entries), "published once, from the feed relay's own checkpoint (OP-1's request is behind it)")
	for i, m := range got {
		var e feed.Entry
		require.NoError(t, json.Unmarshal(m.Value, &e))
		require.Equal(t, want.Entries[i], e)
		require.Equal(t, string(e.OperationID), m.Key, "keyed by operation")
		require.Equal(t, e.EventID, m.MessageID)
		require.Equal(t, e.EventID, m.Headers[transport.HeaderEventID])
		require.Equal(t, "COR-"+m.Key, m.Headers[transport.HeaderCorrelationID])
		require.Equal(t, int64(100), e.AmountMinor)
	}
	require.Equal(t, domain.OperationID("OP-1"), want.Entries[0].OperationID)
}
