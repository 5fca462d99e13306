package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// TestFencedAppendsReadTheFenceByIndex: on a fresh, empty schema — where
// a prepared statement settles on the plan it keeps while the table grows
// — the append statements read a fence's event by an index, never by
// scanning or hashing the events table (a hashed subplan did, on every
// grouped append, once the events table had grown: serve's HTTP Claimed/s
// fell by a third on a fresh database).
func TestFencedAppendsReadTheFenceByIndex(t *testing.T) {
	t.Parallel()
	s := pgtest.OpenStore(t)
	batch, fenced, err := s.ExplainGenericAppends(t.Context())
	require.NoError(t, err)
	for name, plan := range map[string]string{"grouped": batch, "alone": fenced} {
		require.NotContains(t, plan, "Seq Scan on events", "%s: %s", name, plan)
		require.NotContains(t, plan, "hashed SubPlan", "%s: %s", name, plan)
		require.Contains(t, plan, "Index Scan using events_", "%s: %s", name, plan)
	}
}
