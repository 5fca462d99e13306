package pgqueue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/eventstore/postgres/pgtest"
)

// newInternalQueue is a queue of worker "w" on a fresh transport schema.
func newInternalQueue(t *testing.T) (*pgxpool.Pool, string, *Queue) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pgstate.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	q, err := New(Config{DB: pool, Schema: schema, WorkerID: "w"})
	require.NoError(t, err)
	return pool, schema, q
}

// TestAckBatchKeepsEachResult: acknowledgements sharing one statement each
// get their own answer: the message whose claim was taken over (its attempt
// moved on) is not acknowledged and gets ErrClaimLost, the others are.
func TestAckBatchKeepsEachResult(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema, q := newInternalQueue(t)
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

// TestAClaimCarriesTheAcknowledgements: a claim that carries
// acknowledgements settles each under its own claim, as the acker's
// statement does, and claims none of the rows it acknowledges (one whose
// visibility timeout passed is visible again); a key whose message it
// acknowledges has its next message handed out by the next claim.
func TestAClaimCarriesTheAcknowledgements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema, q := newInternalQueue(t)
	table := pgx.Identifier{schema, "messages"}.Sanitize()
	var msgs []transport.Outbound
	for _, m := range [][2]string{{"MSG-1", "A"}, {"MSG-2", "B"}, {"MSG-3", "C"}, {"MSG-4", "A"}} {
		msgs = append(msgs, transport.Outbound{Topic: transport.TopicRefundRequests, MessageID: m[0], Key: m[1], Value: []byte(`{}`)})
	}
	require.NoError(t, q.Publish(ctx, msgs))
	claimed, err := q.Claim(ctx, "w", 10)
	require.NoError(t, err)
	require.Len(t, claimed, 3, "MSG-4 waits for MSG-1, the same key")
	byID := map[string]Claimed{}
	for _, c := range claimed {
		byID[c.MessageID] = c
	}
	// MSG-2 was taken over by another claimer; MSG-3's visibility timeout passed.
	_, err = pool.Exec(ctx, "UPDATE "+table+" SET attempts = attempts + 1 WHERE id = $1", byID["MSG-2"].ID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "UPDATE "+table+" SET visible_at = now() - interval '1 second' WHERE id = $1", byID["MSG-3"].ID)
	require.NoError(t, err)

	var acks []*pendingAck
	for _, id := range []string{"MSG-1", "MSG-2", "MSG-3"} {
		acks = append(acks, &pendingAck{c: byID[id], done: make(chan error, 1)})
	}
	more, acked, err := q.claim(ctx, "w", 10, acks)
	require.NoError(t, err)
	require.Empty(t, more, "neither the acknowledged MSG-3 nor MSG-4, whose key's message this statement acknowledged")
	require.ElementsMatch(t, []int64{byID["MSG-1"].ID, byID["MSG-3"].ID}, acked)
	(&acker{q: q}).answer(ctx, acks, acked, nil)
	require.NoError(t, <-acks[0].done)
	require.True(t, errors.Is(<-acks[1].done, ErrClaimLost), "the taken-over message is not acknowledged under the old claim")
	require.NoError(t, <-acks[2].done)

	next, err := q.Claim(ctx, "w", 10)
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, "MSG-4", next[0].MessageID)

	states := map[string]string{}
	rows, err := pool.Query(ctx, "SELECT message_id, state FROM "+table)
	require.NoError(t, err)
	var id, state string
	_, err = pgx.ForEachRow(rows, []any{&id, &state}, func() error { states[id] = state; return nil })
	require.NoError(t, err)
	require.Equal(t, map[string]string{"MSG-1": "acked", "MSG-2": "ready", "MSG-3": "acked", "MSG-4": "ready"}, states)
}

// TestAnAcknowledgementRunAgainIsAnswered: an acknowledgement run again
// under the same claim (its answer was lost: a claim that carried it
// failed, or a settle tried again) is answered as acknowledged, the row's
// settled_at kept; under a claim taken over it is still ErrClaimLost.
func TestAnAcknowledgementRunAgainIsAnswered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, schema, q := newInternalQueue(t)
	table := pgx.Identifier{schema, "messages"}.Sanitize()
	require.NoError(t, q.Publish(ctx, []transport.Outbound{
		{Topic: transport.TopicRefundRequests, MessageID: "MSG-1", Key: "A", Value: []byte(`{}`)},
		{Topic: transport.TopicRefundRequests, MessageID: "MSG-2", Key: "B", Value: []byte(`{}`)},
	}))
	claimed, err := q.Claim(ctx, "w", 2)
	require.NoError(t, err)
	require.Len(t, claimed, 2)
	a := &acker{q: q}
	once := []*pendingAck{{c: claimed[0], done: make(chan error, 1)}}
	_, acked, err := q.claim(ctx, "w", 1, once)
	require.NoError(t, err)
	require.Equal(t, []int64{claimed[0].ID}, acked)
	var settled time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT settled_at FROM "+table+" WHERE id = $1", claimed[0].ID).Scan(&settled))

	// The claim's answer was lost: its acknowledgement runs again, alone.
	again := []*pendingAck{{c: claimed[0], done: make(chan error, 1)}}
	a.run(context.WithoutCancel(ctx), again)
	require.NoError(t, <-again[0].done)
	require.NoError(t, q.Settle(ctx, claimed[0], transport.Disposition{Action: transport.ActionAck}))
	var kept time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT settled_at FROM "+table+" WHERE id = $1", claimed[0].ID).Scan(&kept))
	require.True(t, settled.Equal(kept), "settled_at kept: %s, then %s", settled, kept)

	// Acknowledged under the next claim (the first one's timeout passed and
	// it was handed out again): the first claim's acknowledgement is refused.
	_, err = pool.Exec(ctx, "UPDATE "+table+" SET attempts = attempts + 1 WHERE id = $1", claimed[1].ID)
	require.NoError(t, err)
	taken := claimed[1]
	taken.Attempt++
	require.NoError(t, q.Settle(ctx, taken, transport.Disposition{Action: transport.ActionAck}))
	late := []*pendingAck{{c: claimed[1], done: make(chan error, 1)}}
	a.run(context.WithoutCancel(ctx), late)
	require.ErrorIs(t, <-late[0].done, ErrClaimLost)
	require.ErrorIs(t, q.Settle(ctx, claimed[1], transport.Disposition{Action: transport.ActionAck}), ErrClaimLost)
}
