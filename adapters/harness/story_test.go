package harness_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/harness/pgstack"
	"opledger/domain"
	"opledger/domain/audit"
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
			requireExportStory(t, w, &out)
		})
	}
}

// requireExportStory plays the second kind after the refund story and
// checks it on the export-delivery service's ledger (three deliveries, one
// per key, nothing delivered twice), the ledger's answers and audit verify
// over the whole log.
func requireExportStory(t *testing.T, w *harness.World, out *bytes.Buffer) {
	t.Helper()
	sum, err := harness.RunExportStory(t.Context(), w, out)
	require.NoError(t, err, out.String())
	require.Equal(t, harness.ExportSummary{
		ExportUses: 3, ExportsDelivered: 3, ExportKeys: 3, ExportReplaysRejected: 1, ExportUnknownReconciled: 1,
		ExportFinalState: string(domain.OpCompleted),
	}, sum, out.String())
	l := w.Sim.Ledger()
	require.Equal(t, 1, l.ByOperation[string(harness.StoryOperation)].RefundsCreated, "the refund story's one refund")
	require.Zero(t, l.ByOperation[string(harness.ExportOperation)].RefundsCreated, "no refund for the export")
	require.Len(t, l.DeliveriesByKey, 3)
	for key, n := range l.DeliveriesByKey {
		require.Equal(t, 1, n, key)
	}
	require.Contains(t, out.String(), "OperationNotExecutable (operation.outcome-unknown)")
	require.Contains(t, out.String(), "download MSG-DL-5: AlreadyConsumed (capability.already-consumed), replay suspected true, execution attempted false")
	waitVisibleAll(t, w.Store)
	rep, err := audit.Verify(t.Context(), w.Store, audit.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK(), "%+v", rep.Violations)
}

// waitVisibleAll polls, with a bound, until the global log shows every
// event of every stream the stories wrote (PostgreSQL withholds events
// while an older transaction anywhere is open).
func waitVisibleAll(t *testing.T, store eventstore.Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := store.ReadAll(t.Context(), nil, 10_000)
		require.NoError(t, err)
		n := 0
		for _, op := range []domain.OperationID{harness.StoryOperation, harness.ExportOperation} {
			page, err := store.ReadStream(t.Context(), op.StreamName(), 0, 10_000)
			require.NoError(t, err)
			n += len(page)
		}
		seen := 0
		for _, r := range recs {
			if r.StreamID == harness.StoryOperation.StreamName() || r.StreamID == harness.ExportOperation.StreamName() {
				seen++
			}
		}
		if seen >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "the log shows %d of %d events", seen, n)
		time.Sleep(10 * time.Millisecond) // polling a condition with a bound
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
	stack, err := pgstack.Start(t.Context(), pool, store, pgstack.Options{ViewSchema: schema + "_rm", TransportSchema: schema + "_tr"})
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
	requireExportStory(t, w, &out)
}
