package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

func TestMigrationsAreNumbered(t *testing.T) {
	t.Parallel()
	ms, err := postgres.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		require.NotEmpty(t, m.Name)
		require.NotEmpty(t, m.SQL)
	}
}

// TestMigrate: nothing exists before Migrate; Migrate is idempotent and
// serializes concurrent callers; CheckSchema tells a current schema from an
// outdated or missing one.
func TestMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store, err := postgres.New(pool, schema)
	require.NoError(t, err)

	// Opening a store creates nothing.
	require.ErrorIs(t, store.CheckSchema(ctx), postgres.ErrSchemaOutdated, "never migrated")
	_, err = store.Append(ctx, "s", eventstore.NoStream(), newEvents(1))
	require.ErrorIs(t, err, postgres.ErrSchemaOutdated, "an unmigrated schema is reported as such")
	require.NotErrorIs(t, err, eventstore.ErrUnavailable)

	// Concurrent migrators: exactly one applies the migrations.
	const migrators = 4
	applied := make([][]int, migrators)
	errs := make([]error, migrators)
	var wg sync.WaitGroup
	for i := range migrators {
		wg.Go(func() { applied[i], errs[i] = postgres.Migrate(ctx, pool, schema) })
	}
	wg.Wait()
	all, err := postgres.Migrations()
	require.NoError(t, err)
	var appliers int
	for i := range migrators {
		require.NoError(t, errs[i])
		if len(applied[i]) > 0 {
			appliers++
			require.Len(t, applied[i], len(all))
		}
	}
	require.Equal(t, 1, appliers, "one migrator applies, the others find the schema current")
	require.NoError(t, store.CheckSchema(ctx))

	again, err := postgres.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, again, "migrating a current schema is a no-op")

	// A database behind the binary is refused.
	_, err = pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema, "schema_migrations"}.Sanitize()+" WHERE version = $1", all[len(all)-1].Version)
	require.NoError(t, err)
	err = store.CheckSchema(ctx)
	require.ErrorIs(t, err, postgres.ErrSchemaOutdated)
	require.Contains(t, err.Error(), all[len(all)-1].Name)
}

// TestMigrateUnreachable: Migrate reports a server it cannot reach as
// unavailable.
func TestMigrateUnreachable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(redirect(t, pgtest.URL(), closedPort(t)))
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = postgres.Migrate(context.WithoutCancel(t.Context()), pool, "")
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
}

// TestCheckSchemaRefusesRestoredLog: a log whose transaction ids the server
// has not reached (as after pg_restore into a new cluster) is refused.
func TestCheckSchemaRefusesRestoredLog(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	require.NoError(t, store.CheckSchema(ctx), "empty log")
	_, err := store.Append(ctx, "s", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	require.NoError(t, store.CheckSchema(ctx), "a log written here")

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "events"}.Sanitize()+`
		(transaction_id, stream_id, stream_version, event_id, event_type)
		VALUES ((1::bigint << 40)::text::xid8, 'restored', 0, gen_random_uuid(), 'T')`)
	require.NoError(t, err)
	err = store.CheckSchema(ctx)
	require.ErrorIs(t, err, postgres.ErrLogAheadOfServer)
	require.NotErrorIs(t, err, eventstore.ErrUnavailable)
}
