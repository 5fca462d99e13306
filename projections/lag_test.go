package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/codec"
	"opledger/projections"
)

// Lag counts the events after the checkpoint (bounded) and how long the
// oldest of them has waited; both are zero once caught up.
func TestLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	lag, err := projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema})
	require.NoError(t, err)
	require.Equal(t, projections.Lag{}, lag, "an empty log: nothing behind")

	for range 4 {
		e.request("OP-"+time.Now().Format("150405.000000000"), 1_000)
	}
	e.waitVisible()
	events, err := e.store.ReadAll(t.Context(), nil, 100)
	require.NoError(t, err)
	require.Len(t, events, 4)
	// The ledger's clock (the env's manual one) stamped them; the store's
	// clock (RecordedAt) is another one, days away.
	meta, err := codec.DecodeMetadata(events[0].Metadata)
	require.NoError(t, err)
	now := meta.RecordedAt.Add(90 * time.Second)
	require.Greater(t, events[0].RecordedAt.Sub(now).Abs(), time.Hour, "the two clocks differ")

	lag, err = projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema, Now: now})
	require.NoError(t, err)
	require.Equal(t, int64(4), lag.Events)
	require.False(t, lag.Capped)
	require.Equal(t, 90*time.Second, lag.Behind, "the ledger's now minus the ledger's time of the oldest unapplied event")

	lag, err = projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema, Now: now, MaxEvents: 3})
	require.NoError(t, err)
	require.Equal(t, int64(3), lag.Events)
	require.True(t, lag.Capped)
	lag, err = projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema, Now: now, MaxEvents: 4})
	require.NoError(t, err)
	require.False(t, lag.Capped, "exactly the bound is not more than it")

	e.catchUp()
	lag, err = projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema, Now: now})
	require.NoError(t, err)
	require.Zero(t, lag.Events)
	require.Zero(t, lag.Behind)
	require.Equal(t, e.lastEvent(), lag.Checkpoint.Text)

	// Now behind the event's time: never a negative lag.
	e.request("OP-LATE", 1_000)
	e.waitVisible()
	lag, err = projections.MeasureLag(t.Context(), e.pool, e.store, projections.LagOptions{Schema: e.schema, Now: now.Add(-time.Hour)})
	require.NoError(t, err)
	require.Equal(t, int64(1), lag.Events)
	require.Zero(t, lag.Behind)
}
