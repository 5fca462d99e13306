package pgqueue

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/eventstore/postgres/pgtest"
)

// TestAckBatchKeepsEachResult: acknowledgements sharing one statement each
// get their own answer: the message whose claim was taken over (its attempt
// moved on) is not acknowledged and gets ErrClaimLost, the others are.
func TestAckBatchKeepsEachResult(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgstate.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	q, err := New(Config{DB: pool, Schema: schema, WorkerID: "w"})
	require.NoError(t, err)
	var msgs []transport.Outbound
	for _, id := range []string{"MSG-1", "MSG-2", "MSG-3"} {
		msgs = append(msgs, transport.Outbound{Topic: transport.TopicRefundRequests, MessageID: id, Key: id, Value: []byte(`{}`)})
	}
	require.NoError(t, q.Publish(ctx, msgs))
	claimed, err := q.Claim(ctx, "w", 3)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	// Another claimer took the second one over (its visibility timeout passed).
	_, err = pool.Exec(ctx, "UPDATE "+pgx.Identifier{schema, "messages"}.Sanitize()+" SET attempts = attempts + 1 WHERE id = $1", claimed[1].ID)
	require.NoError(t, err)

	a := &acker{q: q}
	batch := make([]*pendingAck, len(claimed))
	for i, c := range claimed {
		batch[i] = &pendingAck{c: c, done: make(chan error, 1)}
	}
	a.run(context.WithoutCancel(ctx), batch)
	require.NoError(t, <-batch[0].done)
	require.True(t, errors.Is(<-batch[1].done, ErrClaimLost), "the taken-over message is not acknowledged under the old claim")
	require.NoError(t, <-batch[2].done)

	states := map[int64]string{}
	rows, err := pool.Query(ctx, "SELECT id, state FROM "+pgx.Identifier{schema, "messages"}.Sanitize())
	require.NoError(t, err)
	var id int64
	var state string
	_, err = pgx.ForEachRow(rows, []any{&id, &state}, func() error { states[id] = state; return nil })
	require.NoError(t, err)
	require.Equal(t, map[int64]string{claimed[0].ID: "acked", claimed[1].ID: "ready", claimed[2].ID: "acked"}, states)
}
