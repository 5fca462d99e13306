package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// TestVerifyAcrossPages: many operations over many pages, decoded ahead in
// parallel, checked in log order; the one violation among them is found
// where it is, and the open Unknowns are listed oldest first up to the bound.
func TestVerifyAcrossPages(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		const ops = 120
		var total int64
		for i := range ops {
			op := domain.OperationID(fmt.Sprintf("OP-%03d", i))
			h := newHistory(t, store, op)
			h.claimed()
			switch {
			case i == 57: // a stale write accepted
				h.by("worker-a", "EXE-1", outcome("EXE-1", 2, domain.Completed, "re_57", at(10*time.Second)))
			case i%10 == 0: // the executor's own Unknown, left open
				h.by("worker-a", "EXE-1", domain.OutcomeUnknown{ExecutionID: "EXE-1", LeaseEpoch: 1, Cause: "timeout", RecordedAt: at(33 * time.Second)})
			default:
				h.by("worker-a", "EXE-1", outcome("EXE-1", 1, domain.Completed, fmt.Sprintf("re_%d", i), at(10*time.Second)))
			}
			total += h.next
		}
		rep := verify(t, store, total, audit.VerifyOptions{PageSize: 256, MaxListedUnknowns: 5})
		require.Equal(t, total, rep.Events)
		require.Equal(t, int64(ops), rep.Operations)
		require.Equal(t, int64(1), rep.ViolationCount)
		require.Equal(t, "I5", rep.Violations[0].Invariant)
		require.Equal(t, domain.OperationID("OP-057"), rep.Violations[0].Operation)
		require.Equal(t, int64(12), rep.OpenUnknownCount)
		require.Len(t, rep.OpenUnknowns, 5)
		for i, u := range rep.OpenUnknowns {
			require.Equal(t, domain.OperationID(fmt.Sprintf("OP-%03d", 10*i)), u.Operation, "oldest first")
		}
		require.Equal(t, audit.ExecutionCounts{Completed: ops - 12, Unknown: 12}, rep.Executions)
	})
}
