package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/codec/codectest"
)

// TestProjectorReadsTheLogsEarlierBuildsWrote: the projector folds each
// frozen log (the story as main wrote it before leases were bound to their
// holder, and before schema evolution; domain/codec/codectest) into the
// read models on PostgreSQL, skipping nothing, with every operation where
// the story leaves it.
func TestProjectorReadsTheLogsEarlierBuildsWrote(t *testing.T) {
	names, err := codectest.Logs()
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, log, err := codectest.Log(name)
			require.NoError(t, err)
			e := newEnv(t, time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
			require.NoError(t, codectest.AppendLog(t.Context(), e.store, log))
			require.Equal(t, int64(len(log)), e.catchUp())

			require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.skipped_events`))
			require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE projection_incomplete`))
			states := map[string]string{
				"OP-4471": "Completed", "OP-5001": "Completed", "OP-5002": "Completed", "OP-5003": "Unknown",
				"OP-5004": "Escalated", "OP-5005": "Completed", "OP-5006": "Executing",
			}
			require.Equal(t, int64(len(states)), e.count(e.schema, `SELECT count(*) FROM %s.operations`))
			for op, state := range states {
				require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.operations WHERE id = $1 AND state = $2`, op, state), op)
			}
			require.Equal(t, int64(8), e.count(e.schema, `SELECT count(*) FROM %s.executions`))
			require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE id = 'EXE-1' AND state = 'Completed' AND outcome_source = 'reconciliation'`))
			require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE id = 'EXE-5005' AND outcome_source = 'late-outcome'`))
			require.Equal(t, int64(12), e.count(e.schema, `SELECT count(*) FROM %s.capabilities`))
			require.Equal(t, int64(2), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE replay_suspected`), "the Friday replay and OP-5002's")
			require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE kind = 'WriteRefused' AND reason = 'lease.lost'`))
			require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.evidence WHERE operation_id = 'OP-NOPE'`), "the evidence stream's")
		})
	}
}
