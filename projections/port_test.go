package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// The projector, its lag and a rebuild work over the port alone: here the
// log is the in-memory store (no Head, its own positions), the read models
// Postgres.
func TestOverAnotherBackend(t *testing.T) {
	t.Parallel()
	c := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(c.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: c})
	require.NoError(t, err)
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	_, err = projections.Migrate(t.Context(), pool, schema)
	require.NoError(t, err)
	e := &env{t: t, url: url, schema: schema, pool: pool, clock: c, h: h}
	o := e.request("OP-M", 1_000)
	x := o.execute("MSG-M1")
	o.claim("MSG-M1", "CAP-NONE")

	lag, err := projections.MeasureLag(t.Context(), pool, store, projections.LagOptions{Schema: schema, Now: c.Now().Add(time.Minute), MaxEvents: 2})
	require.NoError(t, err)
	require.Equal(t, int64(2), lag.Events)
	require.True(t, lag.Capped)
	require.Equal(t, time.Minute, lag.Behind)

	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: schema, BatchSize: 2})
	require.NoError(t, err)
	n, err := p.CatchUp(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	lag, err = projections.MeasureLag(t.Context(), pool, store, projections.LagOptions{Schema: schema})
	require.NoError(t, err)
	require.Zero(t, lag.Events)
	require.Equal(t, "5", lag.Checkpoint.Text, "the memory store's position")
	require.Equal(t, int64(1), e.count(schema, `SELECT count(*) FROM %s.executions WHERE id = $1 AND state = 'Executing'`, string(x)))
	e.requireDelivery("MSG-M1", "OP-M", string(domain.StatusClaimed), 2)

	_, side := pgtest.Schema(t)
	_, err = projections.Rebuild(t.Context(), pool, store, projections.RebuildOptions{Live: schema, Schema: side})
	require.NoError(t, err)
	e.requireSameRows(schema, side)
}
