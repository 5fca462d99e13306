package pgqueue_test

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/eventstore/postgres/pgtest"
)

// TestStats counts unsettled messages and dead letters per topic, leaves
// acknowledged ones out, and says when it hit its cap.
func TestStats(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgqueue.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: "stats"})
	require.NoError(t, err)

	empty, err := pgqueue.Stats(t.Context(), pool, schema, 0)
	require.NoError(t, err)
	require.Empty(t, empty)

	var msgs []transport.Outbound
	for i := range 5 {
		topic := "topic-a"
		if i >= 3 {
			topic = "topic-b"
		}
		msgs = append(msgs, transport.Outbound{Topic: topic, MessageID: fmt.Sprintf("MSG-%d", i), Key: fmt.Sprintf("k%d", i), Value: []byte("{}")})
	}
	require.NoError(t, q.Publish(t.Context(), msgs))
	table := pgx.Identifier{schema, "messages"}.Sanitize()
	_, err = pool.Exec(t.Context(), "UPDATE "+table+" SET state = 'dead', dead_reason = 'test' WHERE message_id = 'MSG-0'")
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), "UPDATE "+table+" SET state = 'acked' WHERE message_id = 'MSG-3'")
	require.NoError(t, err)

	stats, err := pgqueue.Stats(t.Context(), pool, schema, 0)
	require.NoError(t, err)
	require.Equal(t, []pgqueue.TopicStats{
		{Topic: "topic-a", Ready: 2, Dead: 1},
		{Topic: "topic-b", Ready: 1},
	}, stats)

	capped, err := pgqueue.Stats(t.Context(), pool, schema, 2)
	require.NoError(t, err)
	var ready int64
	for _, s := range capped {
		ready += s.Ready
		require.True(t, s.Capped)
	}
	require.Equal(t, int64(2), ready, "the count stops at the cap")
	_, err = pgqueue.Stats(t.Context(), pool, "bad schema;", 0)
	require.Error(t, err)
}
