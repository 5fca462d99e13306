package projections

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// The append-only rows (evidence, reconciliations) are copied in on a
// batch's first application and inserted once when it is applied again:
// both ways store the same values (an empty optional member is NULL, as
// jsonb_populate_recordset makes it), a copy of a row already there is
// errRowExists, and inserting it once again leaves it as it was.
func TestAppendOnlyRowsCopiedAsInsertedOnce(t *testing.T) {
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = Migrate(ctx, pool, schema)
	require.NoError(t, err)
	sql := newStatements(schema)

	at := time.Date(2026, 11, 27, 9, 0, 0, 123456789, time.UTC)
	yes, epoch, current := true, int64(1), int64(2)
	rows := func(prefix string, seq int64) ([]*evidenceRow, []*reconciliationRow) {
		return []*evidenceRow{
				{EventID: prefix + "-e1", EventSeq: seq, Position: "1/1", StreamID: "operation-OP-1", Kind: "PresentationRejected",
					RecordedAt: at, StoredAt: at, OperationID: "OP-1", CapabilityID: "CAP-1.1", Status: "AlreadyConsumed",
					Reason: "capability.already-consumed", ExecutionAttempted: &yes, ReplaySuspected: true, Count: 1, Actor: "worker-token"},
				{EventID: prefix + "-e2", EventSeq: seq + 1, Position: "1/2", StreamID: "operation-OP-1", Kind: "WriteRefused",
					RecordedAt: at, StoredAt: at, OperationID: "OP-1", ExecutionID: "EXE-1.1", Worker: "w-2", Reason: "",
					Detail: "lease not held", Command: "RecordOutcome", LeaseEpoch: &epoch, CurrentEpoch: &current,
					Outcome: "NotApplied", ProviderReference: "re_1", Count: 1},
				{EventID: prefix + "-e3", EventSeq: seq + 4, Position: "1/3", StreamID: "evidence-OP-1", Kind: "RefusalsSummarized",
					RecordedAt: at, StoredAt: at, OperationID: "OP-1", ExecutionID: "EXE-1.1", Reason: "lease.not-held", Count: 40,
					Summary: json.RawMessage(`{"scope":"execution","count":40,"samples":[{"detail":"a\\x00b"}]}`)},
			}, []*reconciliationRow{
				{EventID: prefix + "-r1", EventSeq: seq + 2, Kind: "Escalated", ExecutionID: "EXE-1.1", OperationID: "OP-1",
					Reason: "cannot-tell", At: at},
				{EventID: prefix + "-r2", EventSeq: seq + 3, Kind: "Reconciled", ExecutionID: "EXE-1.1", OperationID: "OP-1",
					Outcome: "Completed", Method: "provider-lookup", ProviderReference: "re_1", Actor: "reconciler", Evidence: "lookup", At: at},
			}
	}
	write := func(again bool, evs []*evidenceRow, recs []*reconciliationRow) error {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(context.WithoutCancel(ctx))
		var b pgx.Batch
		if err := writeAppendOnly(ctx, tx, &b, sql.evidence, evs, again); err != nil {
			return err
		}
		if err := writeAppendOnly(ctx, tx, &b, sql.reconciliations, recs, again); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	copied, copiedRecs := rows("copy", 1)
	once, onceRecs := rows("once", 101)
	require.NoError(t, write(false, copied, copiedRecs))
	require.NoError(t, write(true, once, onceRecs))

	for table, n := range map[string]int{"evidence": 3, "reconciliations": 2} {
		var got [][]byte
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg((to_jsonb(t) - 'event_id' - 'event_seq')::text ORDER BY event_seq)
FROM `+pgx.Identifier{schema, table}.Sanitize()+` t`).Scan(&got))
		require.Len(t, got, 2*n, table)
		for i := range n {
			require.JSONEq(t, string(got[i]), string(got[n+i]), "%s: copied and inserted once alike", table)
		}
	}
	var counted int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(count) FROM `+pgx.Identifier{schema, "evidence"}.Sanitize()).Scan(&counted))
	require.Equal(t, int64(2*(1+1+40)), counted, "every row counts its refusals")
	var nulls int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "evidence"}.Sanitize()+
		` WHERE message_id IS NULL AND execution_state IS NULL AND reason = '' AND summary IS NULL AND actor IS NULL`).Scan(&nulls))
	require.Equal(t, 2, nulls, "an empty optional member is NULL; an empty required one is ''")

	require.ErrorIs(t, write(false, copied, copiedRecs), errRowExists, "copying a row already there")
	require.NoError(t, write(true, copied, copiedRecs), "inserting it once again")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "evidence"}.Sanitize()).Scan(&n))
	require.Equal(t, 6, n)
}
