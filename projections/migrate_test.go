package projections_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// Nothing creates the schema but Migrate; CheckSchema and the projector
// refuse a schema that is missing migrations.
func TestMigrateAndCheckSchema(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	ctx := t.Context()

	require.ErrorIs(t, projections.CheckSchema(ctx, pool, schema), projections.ErrSchemaOutdated)
	store := pgtest.OpenStore(t)
	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: schema})
	require.NoError(t, err)
	require.ErrorIs(t, p.Run(ctx), projections.ErrSchemaOutdated, "the projector refuses an unmigrated schema")
	_, err = p.CatchUp(ctx)
	require.ErrorIs(t, err, projections.ErrSchemaOutdated)

	migrations, err := projections.Migrations()
	require.NoError(t, err)
	require.NotEmpty(t, migrations)
	applied, err := projections.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Len(t, applied, len(migrations))
	applied, err = projections.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	require.Empty(t, applied, "a current schema is left alone")
	require.NoError(t, projections.CheckSchema(ctx, pool, schema))

	_, err = pool.Exec(ctx, `DELETE FROM "`+schema+`".schema_migrations WHERE version = 1`)
	require.NoError(t, err)
	err = projections.CheckSchema(ctx, pool, schema)
	require.ErrorIs(t, err, projections.ErrSchemaOutdated)
	require.ErrorContains(t, err, "001_read_models")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	url, _ := pgtest.Schema(t)
	pool := openPool(t, url)
	store := pgtest.OpenStore(t)
	for name, cfg := range map[string]projections.Config{
		"no pool":         {Store: store},
		"no store":        {Pool: pool},
		"batch too big":   {Pool: pool, Store: store, BatchSize: projections.MaxBatchSize + 1},
		"backoff order":   {Pool: pool, Store: store, MinBackoff: time.Second, MaxBackoff: time.Millisecond},
		"schema too long": {Pool: pool, Store: store, Schema: string(make([]byte, 64))},
	} {
		_, err := projections.New(cfg)
		require.Error(t, err, name)
	}
	p, err := projections.New(projections.Config{Pool: pool, Store: store})
	require.NoError(t, err)
	require.NoError(t, p.Stop(), "stopping a projector never started is a no-op")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, p.Start(ctx))
	require.Error(t, p.Start(ctx), "started twice")
	require.NoError(t, p.Stop())
}
