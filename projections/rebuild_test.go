package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// A rebuild from the start of the log equals the live projection row for
// row, however the live one was batched.
func TestRebuildEqualsLive(t *testing.T) {
	t.Parallel()
	// Nanoseconds in every time: rows written in one batch or updated
	// across many must agree to the microsecond.
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 987654567, time.UTC))
	e.world()
	e.waitVisible()
	live := e.projector(func(c *projections.Config) { c.BatchSize = 2 })
	_, err := live.CatchUp(t.Context())
	require.NoError(t, err)

	_, side := pgtest.Schema(t)
	res, err := projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side, Clock: e.clock})
	require.NoError(t, err)
	require.False(t, res.Swapped)
	require.Equal(t, side, res.Schema)
	require.Equal(t, e.lastEvent(), res.Checkpoint.Text)
	require.NoError(t, projections.CheckSchema(t.Context(), e.pool, side))
	e.requireFilled(side)
	e.requireSameRows(e.schema, side)

	// A rebuild refuses a schema that holds anything.
	_, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side})
	require.ErrorContains(t, err, "not empty")
}

// A rebuild to a past position, or as of a past instant, equals the live
// projection as it stood then: the auditors' view.
func TestRebuildAsOfPastPoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	a := e.request("OP-A", 1_000)
	xa := a.execute("MSG-A1")
	a.record(xa, domain.Unknown, "")
	a.claim("MSG-A1", "CAP-X")

	// then: a projection caught up to this point and left there.
	_, then := pgtest.Schema(t)
	_, err := projections.Migrate(t.Context(), e.pool, then)
	require.NoError(t, err)
	past := e.projector(func(c *projections.Config) { c.Schema = then })
	e.waitVisible()
	_, err = past.CatchUp(t.Context())
	require.NoError(t, err)
	point := e.lastEvent()
	require.Equal(t, point, e.checkpoint(then).Text)
	events, err := e.store.ReadAll(t.Context(), nil, 1000)
	require.NoError(t, err)
	asOf := events[len(events)-1].RecordedAt

	// The history goes on, and the live projection with it.
	a.reconcile(xa, domain.Completed, "re_A")
	a.claim("MSG-A1", "CAP-X")
	b := e.request("OP-B", 2_000)
	b.execute("MSG-B1")
	e.catchUp()

	_, toPosition := pgtest.Schema(t)
	res, err := projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: toPosition, ToPosition: point})
	require.NoError(t, err)
	require.Equal(t, point, res.Checkpoint.Text)
	e.requireSameRows(then, toPosition)

	require.Equal(t, len(events), res.Folded)
	require.Equal(t, len(events), res.Read, "read up to the position, not beyond")

	_, asOfSchema := pgtest.Schema(t)
	res, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: asOfSchema, AsOf: asOf})
	require.NoError(t, err)
	require.Equal(t, int64(len(events)), e.checkpoint(asOfSchema).EventsApplied, "only events recorded by %s", asOf)
	all, err := e.store.ReadAll(t.Context(), nil, 1000)
	require.NoError(t, err)
	require.Equal(t, len(events), res.Folded, "what it folded, as it says")
	require.Equal(t, len(all), res.Read, "the whole log read: the later events left out")
	require.Greater(t, res.Read, res.Folded)
	for _, table := range tables {
		require.Equal(t, e.count(then, `SELECT count(*) FROM %s.`+table), e.count(asOfSchema, `SELECT count(*) FROM %s.`+table), table)
	}
	require.Equal(t, int64(1), e.count(asOfSchema, `SELECT count(*) FROM %s.executions WHERE state = 'Unknown'`))
	require.Zero(t, e.count(asOfSchema, `SELECT count(*) FROM %s.operations WHERE id = 'OP-B'`))

	_, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, AsOf: asOf, Swap: true})
	require.ErrorContains(t, err, "past view never goes live")
}

// A swap replaces the live read models in one transaction while the live
// projector runs and the log grows; the projector continues from the
// rebuild's checkpoint and nothing is applied twice or missed.
func TestRebuildSwapWhileLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	e.world()
	e.start(e.projector(func(c *projections.Config) { c.BatchSize = 5 }))
	e.waitCaughtUp(e.schema)
	// Damage the live rows: the rebuild must not carry this over.
	_, err := e.pool.Exec(t.Context(), e.q(e.schema, `UPDATE %s.deliveries SET times_seen = times_seen + 100`))
	require.NoError(t, err)

	// Queries prepared on the live tables before the swap work after it.
	idx, err := projections.NewIndex(e.pool, e.schema)
	require.NoError(t, err)
	for range 4 { // on every pooled connection
		escalated, err := idx.EscalatedExecutions(t.Context(), 10)
		require.NoError(t, err)
		require.Len(t, escalated, 1)
	}

	// Appends race with the swap.
	more := e.request("OP-MORE", 3_000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 20 {
			more.claim("MSG-DUP", domain.CapabilityID("CAP-"+string(rune('A'+i)))) // first invalid, then duplicates
		}
	}()
	_, side := pgtest.Schema(t)
	res, err := projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side, Swap: true, BatchSize: 7})
	require.NoError(t, err)
	require.True(t, res.Swapped)
	require.Equal(t, e.schema, res.Schema)
	<-done
	require.NoError(t, projections.CheckSchema(t.Context(), e.pool, e.schema))
	e.waitCaughtUp(e.schema)

	e.waitVisible()
	_, fresh := pgtest.Schema(t)
	_, err = projections.Rebuild(t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: fresh})
	require.NoError(t, err)
	e.requireFilled(fresh)
	e.requireSameRows(e.schema, fresh)
	e.requireDelivery("MSG-DUP", "OP-MORE", "Invalid", 20)
	for range 4 {
		escalated, err := idx.EscalatedExecutions(t.Context(), 10)
		require.NoError(t, err)
		require.Len(t, escalated, 1)
	}
	require.Zero(t, e.countCatalog(`SELECT count(*) FROM pg_namespace WHERE nspname = $1`, side), "the rebuild's name is gone: it is live now")
	require.Zero(t, e.countCatalog(`SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'projections_replaced_%'`), "the old schema is dropped")
}
