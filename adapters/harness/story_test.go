package harness_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

func TestStoryEndsWithOneRefund(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) eventstore.Store{
		"memory":   func(*testing.T) eventstore.Store { return memory.New(nil) },
		"postgres": func(t *testing.T) eventstore.Store { return pgtest.OpenStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, err := harness.New(harness.Options{Store: open(t), ClientAttempts: 1})
			require.NoError(t, err)
			t.Cleanup(w.Close)
			var out bytes.Buffer
			sum, err := harness.RunStory(t.Context(), w, &out, harness.DirectCourier{})
			require.NoError(t, err, out.String())
			require.Equal(t, harness.Summary{
				RefundsCreated: 1, ProviderRequests: 1, ReplaysRejected: 1, DuplicatesRecorded: 1,
				UnknownReconciled: 1, FinalState: string(domain.OpCompleted),
			}, sum, out.String())
			require.Contains(t, out.String(), "Fri 15:30:00")
		})
	}
}

// The same story through serve's Postgres roles: the relay publishes into the
// Postgres-only transport, workers claim from it, the unacknowledged message
// comes back after the visibility timeout, and the sweeper and reconciler
// find their candidates through the projections.
func TestStoryThroughThePostgresTransport(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	stack, err := harness.StartPostgresStack(t.Context(), pool, store, harness.StackOptions{ViewSchema: schema + "_rm", TransportSchema: schema + "_tr"})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, stack.Stop())
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+"_rm CASCADE; DROP SCHEMA IF EXISTS "+schema+"_tr CASCADE")
	})
	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1, Index: stack.Index})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	var out bytes.Buffer
	sum, err := harness.RunStory(t.Context(), w, &out, stack.Courier)
	require.NoError(t, err, out.String())
	require.Equal(t, 1, sum.RefundsCreated, out.String())
	require.Equal(t, 1, sum.ProviderRequests)
	require.Equal(t, 1, sum.ReplaysRejected)
	require.Equal(t, 1, sum.DuplicatesRecorded)
	require.Equal(t, string(domain.OpCompleted), sum.FinalState)
	require.Contains(t, out.String(), "the queue redelivers MSG-")
}
