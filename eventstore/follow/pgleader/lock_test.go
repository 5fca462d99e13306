package pgleader_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/follow"
	"opledger/eventstore/follow/pgleader"
	"opledger/eventstore/postgres/pgtest"
)

// One holder at a time: a second lock on the key is refused without error
// until the holder's session ends (here: terminated by the server), then
// takes it; the first finds it lost on its next Check. (The terminate
// waits, bounded, for the session to end.)
func TestOneHolderAndTakeoverWhenTheSessionDies(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	config, err := pgx.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	key := "opledger.test.leader:" + uuid.NewString()
	first, err := pgleader.New(config, key, "pgleader-test-1")
	require.NoError(t, err)
	second, err := pgleader.New(config, key, "pgleader-test-2")
	require.NoError(t, err)
	t.Cleanup(func() { first.Release(context.Background()); second.Release(context.Background()) })

	held, err := first.TryAcquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	held, err = first.TryAcquire(ctx)
	require.NoError(t, err)
	require.True(t, held, "held already")
	held, err = second.TryAcquire(ctx)
	require.NoError(t, err)
	require.False(t, held, "one holder at a time")
	require.NoError(t, first.Check(ctx))

	admin, err := pgx.ConnectConfig(ctx, config)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	var name string
	require.NoError(t, admin.QueryRow(ctx, `SELECT application_name FROM pg_stat_activity WHERE pid = $1`, int32(first.BackendPID())).Scan(&name))
	require.Equal(t, "pgleader-test-1", name)
	var terminated bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, int32(first.BackendPID())).Scan(&terminated))
	require.True(t, terminated)

	require.ErrorIs(t, first.Check(ctx), follow.ErrLeadershipLost)
	require.Zero(t, first.BackendPID())
	held, err = second.TryAcquire(ctx)
	require.NoError(t, err)
	require.True(t, held, "the server released the dead session's lock")

	second.Release(ctx)
	held, err = first.TryAcquire(ctx)
	require.NoError(t, err)
	require.True(t, held, "released by ending the session")
}
