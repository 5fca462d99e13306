package simworld_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// A few schedules on PostgreSQL (a fresh schema each): the same checks over
// the real backend. `opledger sim --store postgres` runs longer sweeps.
func TestSchedulesOnPostgres(t *testing.T) {
	factory, closeStores, err := simworld.PostgresStores(t.Context(), pgtest.URL())
	require.NoError(t, err)
	defer closeStores()
	sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{
		Seed: 5, Schedules: 6, Ops: 2, Faults: simworld.AllFaults, Parallel: 1, Run: simworld.Options{Store: factory},
	})
	require.NoError(t, err)
	if sum.First != nil {
		t.Fatalf("schedule %s failed on PostgreSQL: %v", sum.First.Spec, sum.First.Violations)
	}
	require.Equal(t, 6, sum.Schedules)
	require.Positive(t, sum.Steps)
}

// A schedule's store never answers a read of the global log short while it
// holds committed events another session's transaction holds back (the
// world would judge a relay caught up that has yet to read them): it waits
// for them, here until the read's deadline; once the transaction ends, the
// read shows them.
func TestAHeldBackLogIsNotReadAsCaughtUp(t *testing.T) {
	ctx := t.Context()
	factory, closeStores, err := simworld.PostgresStores(ctx, pgtest.URL())
	require.NoError(t, err)
	defer closeStores()
	store, drop, err := factory(ctx)
	require.NoError(t, err)
	defer drop()

	holder, err := pgx.Connect(ctx, pgtest.URL())
	require.NoError(t, err)
	defer holder.Close(context.WithoutCancel(ctx))
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT txid_current()") // an xid older than the append's
	require.NoError(t, err)
	_, err = store.Append(ctx, "s-1", eventstore.NoStream(), []eventstore.EventData{{ID: uuid.NewString(), Type: "T", Data: []byte(`{}`)}})
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	page, err := store.ReadAll(short, nil, 10)
	require.ErrorIs(t, err, context.DeadlineExceeded, "answered %d events while one was held back", len(page))

	require.NoError(t, tx.Commit(ctx))
	page, err = store.ReadAll(ctx, nil, 10)
	require.NoError(t, err)
	require.Len(t, page, 1)
}
