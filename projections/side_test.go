package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// Side schemas are listed beside the live one and dropped one by one; the
// live read models, another deployment's running ones and a schema without
// read models are never dropped.
func TestSideSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.request("OP-A", 1_000)
	e.catchUp()
	_, side := pgtest.Schema(t)
	_, err := projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side, ToPosition: e.lastEvent()})
	require.NoError(t, err)

	listed, err := projections.ListSchemas(t.Context(), e.pool, e.schema)
	require.NoError(t, err)
	require.Equal(t, e.schema, listed[0].Name, "the live schema first")
	require.True(t, listed[0].Live)
	found := false
	for _, s := range listed[1:] {
		require.False(t, s.Live)
		if s.Name == side {
			found = true
			require.Equal(t, e.lastEvent(), s.Checkpoint)
			require.Positive(t, s.EventsApplied)
		}
	}
	require.True(t, found, "the side schema is listed")

	require.ErrorContains(t, projections.DropSideSchema(t.Context(), e.pool, e.schema, e.schema), "live read models")
	require.ErrorContains(t, projections.DropSideSchema(t.Context(), e.pool, e.schema, e.store.Schema()), "does not hold read models")

	// Another deployment's live read models, its projector running.
	_, other := pgtest.Schema(t)
	_, err = projections.Migrate(t.Context(), e.pool, other)
	require.NoError(t, err)
	e.start(e.projector(func(c *projections.Config) { c.Schema = other }))
	waitFor(t, "the other projector to lead", func() bool { return e.checkpoint(other).Text == e.lastEvent() })
	require.ErrorContains(t, projections.DropSideSchema(t.Context(), e.pool, e.schema, other), "a projector holds its leader lock")

	require.NoError(t, projections.DropSideSchema(t.Context(), e.pool, e.schema, side))
	require.Zero(t, e.countCatalog(`SELECT count(*) FROM pg_namespace WHERE nspname = $1`, side), "gone")
}
