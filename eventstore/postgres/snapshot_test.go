package postgres_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// countingStore counts the events its stream reads return, and its
// snapshot lookups.
type countingStore struct {
	*postgres.Store
	read, lookups atomic.Int64
}

func (c *countingStore) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	c.lookups.Add(1)
	return c.Store.LoadSnapshot(ctx, stream)
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	events, err := c.Store.ReadStream(ctx, stream, from, limit)
	c.read.Add(int64(len(events)))
	return events, err
}

// TestSnapshotColdLoad: a load that folds a long stream keeps a snapshot;
// a later cold load (a handler with an empty cache) reads the stream's
// first page, finds it full, starts from the snapshot, reads only the
// snapshot's event and the ones after it, and ends in the same state as a
// fold from the first event. A snapshot that does not match its
// stream (its event's hash differs) or does not decode is ignored: the
// stream is folded whole, and the state is still right.
func TestSnapshotColdLoad(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	base := pgtest.OpenMigrated(t, url, schema)
	store := &countingStore{Store: base}
	clk := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	handler := func(every int) *ledger.Handler {
		h, err := ledger.New(ledger.Config{Store: store, Clock: clk, SnapshotEvery: every})
		require.NoError(t, err)
		return h
	}
	writer := handler(-1)
	op := domain.OperationID("OP-LONG")
	by := ledger.Cause{Actor: "test"}
	_, err := writer.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 1000, CorrelationID: "COR-1"}, by)
	require.NoError(t, err)
	_, issued, err := writer.DecideAndIssue(ctx, op, domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}},
		domain.IssueCapability{}, by)
	require.NoError(t, err)
	claimed, err := writer.Claim(ctx, op, domain.Claim{MessageID: "MSG-1", CapabilityID: issued.CapabilityID, WorkerID: "w"})
	require.NoError(t, err)
	renew := func(n int) {
		for range n {
			clk.Advance(time.Second)
			_, err := writer.RenewLease(ctx, op, domain.RenewLease{ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret, WorkerID: "w"}, by)
			require.NoError(t, err)
		}
	}
	renew(200)
	full := func() *domain.Operation { // the reference: folded from the first event, no snapshot
		s, err := handler(-1).Load(ctx, op)
		require.NoError(t, err)
		return s
	}
	reads := func(load func()) int64 {
		before := store.read.Load()
		load()
		return store.read.Load() - before
	}
	lookups := store.lookups.Load()
	short := domain.OperationID("OP-SHORT")
	_, err = writer.RequestOperation(ctx, domain.RequestOperation{OperationID: short, OrderID: "ORD-2", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 1000, CorrelationID: "COR-2"}, by)
	require.NoError(t, err)
	_, err = handler(20).Load(ctx, short)
	require.NoError(t, err)
	require.Equal(t, lookups, store.lookups.Load(), "a short stream's cold load looks for no snapshot")

	want := full()
	require.Equal(t, int64(203), want.Version)

	var first *domain.Operation
	require.Equal(t, int64(204), reads(func() { first, err = handler(20).Load(ctx, op) }), "a cold load without a snapshot reads every event")
	require.NoError(t, err)
	require.Equal(t, want, first)
	snap, ok, err := base.LoadSnapshot(ctx, op.StreamName())
	require.NoError(t, err)
	require.True(t, ok, "the long load kept a snapshot")
	require.Equal(t, int64(203), snap.Version)

	// A cold load reads a first page (a short stream ends there), then the
	// snapshot's event and what follows it.
	const probe = 64
	var second *domain.Operation
	require.Equal(t, int64(probe+1), reads(func() { second, err = handler(20).Load(ctx, op) }), "a cold load reads its first page and the snapshot's event")
	require.NoError(t, err)
	require.Equal(t, want, second)

	renew(3)
	want = full()
	var third *domain.Operation
	require.Equal(t, int64(probe+4), reads(func() { third, err = handler(20).Load(ctx, op) }), "and the events after it")
	require.NoError(t, err)
	require.Equal(t, want, third)

	// A command on a state from the snapshot is a command like any other.
	fromSnapshot := handler(20)
	require.NoError(t, fromSnapshot.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: claimed.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: claimed.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_1"}, by))
	want = full()
	require.Equal(t, domain.OpCompleted, want.Status())

	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(ctx))
	table := pgx.Identifier{schema, "snapshots"}.Sanitize()
	for name, tamper := range map[string]string{
		"hash differs":    `UPDATE ` + table + ` SET event_hash = sha256('not the event')`,
		"does not decode": `UPDATE ` + table + ` SET state = convert_to('{"Bogus":1}', 'UTF8')`,
		"version differs": `UPDATE ` + table + ` SET version = version - 1`,
	} {
		_, err := admin.Exec(ctx, tamper)
		require.NoError(t, err, name)
		var got *domain.Operation
		n := reads(func() { got, err = handler(-1).Load(ctx, op) })
		require.NoError(t, err, name)
		require.Equal(t, want.Version+1, n, "%s: the stream is folded whole", name)
		require.Equal(t, want, got, name)
		// Put a good snapshot back for the next case.
		_, err = admin.Exec(ctx, `DELETE FROM `+table)
		require.NoError(t, err)
		_, err = handler(20).Load(ctx, op)
		require.NoError(t, err)
	}
}
