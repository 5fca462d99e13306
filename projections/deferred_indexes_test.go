package projections_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// catalog lists schema's relations: name, kind and, for an index, its
// definition with the schema's name left out.
func (e *env) catalog(schema string) []string {
	e.t.Helper()
	rows, err := e.pool.Query(e.t.Context(), `SELECT c.relname || ' ' || c.relkind::text || ' ' || CASE WHEN c.relkind = 'i' THEN pg_get_indexdef(c.oid) ELSE '' END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 ORDER BY c.relname`, schema)
	require.NoError(e.t, err)
	entries, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(e.t, err)
	for i := range entries {
		entries[i] = strings.ReplaceAll(entries[i], pgx.Identifier{schema}.Sanitize()+".", "")
		entries[i] = strings.ReplaceAll(entries[i], schema+".", "")
	}
	return entries
}

// requireAsMigrated fails unless schema has the relations and the indexes
// (names and definitions) a freshly migrated schema has.
func (e *env) requireAsMigrated(schema string) {
	e.t.Helper()
	_, reference := pgtest.Schema(e.t)
	_, err := projections.Migrate(e.t.Context(), e.pool, reference)
	require.NoError(e.t, err)
	want := e.catalog(reference)
	require.Contains(e.t, strings.Join(want, "\n"), "operations_order_id_idx i CREATE INDEX", "the reference has the migrations' indexes")
	require.Equal(e.t, want, e.catalog(schema))
	require.NoError(e.t, projections.CheckSchema(e.t.Context(), e.pool, schema))
}

// indexExists says whether schema has an index named name.
func (e *env) indexExists(schema, name string) bool {
	e.t.Helper()
	return e.countCatalog(`SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = $2`, schema, name) == 1
}

// A catch-up into fresh read models builds the secondary indexes its fold
// does not read by at its end, and ends with exactly the indexes a migrated
// schema has: a rebuild, a swapped rebuild, and the projector's CatchUp.
func TestCatchUpIntoFreshSchemaEndsWithMigratedIndexes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.world()
	e.waitVisible()

	// The projector's CatchUp into the env's fresh schema: while it folds,
	// the deferred indexes are missing and the fold's own are there.
	live := e.projector(func(c *projections.Config) { c.BatchSize = 2 })
	batches := 0
	live.SetBeforeCommit(func(ctx context.Context, tx pgx.Tx) error {
		batches++
		require.False(t, e.indexExists(e.schema, "operations_order_id_idx"), "deferred during the catch-up")
		require.True(t, e.indexExists(e.schema, "executions_operation_id_idx"), "the fold reads executions by operation")
		require.True(t, e.indexExists(e.schema, "operations_pkey"))
		require.ErrorIs(t, projections.CheckSchema(ctx, tx, e.schema), projections.ErrSchemaOutdated, "refused while indexes are pending")
		return nil
	})
	_, err := live.CatchUp(t.Context())
	require.NoError(t, err)
	require.Greater(t, batches, 1)
	e.requireAsMigrated(e.schema)

	// A second catch-up on the same schema is not into fresh read models:
	// it keeps the indexes.
	e.request("OP-LATER", 500).allow()
	e.waitVisible()
	live.SetBeforeCommit(func(context.Context, pgx.Tx) error {
		require.True(t, e.indexExists(e.schema, "operations_order_id_idx"), "kept on a schema already folded into")
		return nil
	})
	_, err = live.CatchUp(t.Context())
	require.NoError(t, err)
	e.requireAsMigrated(e.schema)

	_, side := pgtest.Schema(t)
	_, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side, Clock: e.clock, BatchSize: 3})
	require.NoError(t, err)
	e.requireAsMigrated(side)
	e.requireSameRows(e.schema, side)

	_, swapped := pgtest.Schema(t)
	res, err := projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: swapped, Clock: e.clock, Swap: true})
	require.NoError(t, err)
	require.True(t, res.Swapped)
	e.requireAsMigrated(e.schema)
	e.requireSameRows(e.schema, side)
}

// cancellingStore cancels a context at its third ReadAll: the reader reads
// one batch ahead, so the first batch has been applied by then.
type cancellingStore struct {
	eventstore.Store
	reads  atomic.Int32
	cancel context.CancelFunc
}

func (s *cancellingStore) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if s.reads.Add(1) == 3 {
		s.cancel()
	}
	return s.Store.ReadAll(ctx, after, limit)
}

// A rebuild or a catch-up stopped half way leaves a schema without its
// deferred indexes, which is refused (no projector runs on it, no rebuild
// goes into it) until Migrate builds them; then it has exactly the indexes
// of a migrated schema and a projector resumes from its checkpoint.
func TestCatchUpStoppedHalfWayIsRefusedUntilMigrated(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.world()
	e.waitVisible()
	total := e.catchUp()

	_, side := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stopping := &cancellingStore{Store: e.store, cancel: cancel}
	_, err := projections.Rebuild(ctx, e.pool, stopping, projections.RebuildOptions{Live: e.schema, Schema: side, Clock: e.clock, BatchSize: 2})
	require.ErrorIs(t, err, context.Canceled)
	folded := e.checkpoint(side).EventsApplied
	require.Positive(t, folded)
	require.Less(t, folded, total)
	require.False(t, e.indexExists(side, "operations_order_id_idx"))

	require.ErrorIs(t, projections.CheckSchema(t.Context(), e.pool, side), projections.ErrSchemaOutdated)
	p := e.projector(func(c *projections.Config) { c.Schema = side })
	_, err = p.CatchUp(t.Context())
	require.ErrorIs(t, err, projections.ErrSchemaOutdated, "no projector on it")
	_, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side})
	require.ErrorContains(t, err, "not empty")

	_, err = projections.Migrate(t.Context(), e.pool, side)
	require.NoError(t, err)
	e.requireAsMigrated(side)
	require.Equal(t, folded, e.checkpoint(side).EventsApplied, "migrate folds nothing")
	_, err = p.CatchUp(t.Context())
	require.NoError(t, err)
	e.requireSameRows(e.schema, side)

	// The projector's CatchUp into a fresh schema, stopped after its first
	// batch.
	_, fresh := pgtest.Schema(t)
	_, err = projections.Migrate(t.Context(), e.pool, fresh)
	require.NoError(t, err)
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	q := e.projector(func(c *projections.Config) { c.Schema = fresh; c.BatchSize = 2 })
	q.SetBeforeCommit(func(context.Context, pgx.Tx) error {
		if e.checkpoint(fresh).EventsApplied > 0 {
			cancel() // the second batch's commit fails
		}
		return nil
	})
	_, err = q.CatchUp(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int64(2), e.checkpoint(fresh).EventsApplied)
	require.ErrorIs(t, projections.CheckSchema(t.Context(), e.pool, fresh), projections.ErrSchemaOutdated)
	_, err = projections.Migrate(t.Context(), e.pool, fresh)
	require.NoError(t, err)
	e.requireAsMigrated(fresh)
	q.SetBeforeCommit(nil)
	_, err = q.CatchUp(t.Context())
	require.NoError(t, err)
	e.requireSameRows(e.schema, fresh)
}
