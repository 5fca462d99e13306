package simworld_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
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
