package audit_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// TestVerifyPassesTheRealHandlersHistory: a history the real handler,
// sweeper and reconciler wrote, the seed's Thursday and Friday included,
// breaks no invariant; its open Unknowns are listed as information.
func TestVerifyPassesTheRealHandlersHistory(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		rep := verify(t, store, n, audit.VerifyOptions{})
		var text bytes.Buffer
		require.NoError(t, rep.WriteText(&text))
		require.True(t, rep.OK(), text.String())
		require.Zero(t, rep.ViolationCount)
		require.Equal(t, n, rep.Events)
		require.Equal(t, int64(1), rep.EvidenceEvents)
		require.Equal(t, int64(len(storyOperations)), rep.Operations)
		require.Equal(t, audit.ExecutionCounts{Executing: 1, Completed: 4, NotApplied: 1, Unknown: 1, Escalated: 1}, rep.Executions)
		require.Equal(t, int64(2), rep.OpenUnknownCount)
		require.Len(t, rep.OpenUnknowns, 2)
		require.Equal(t, opOpen, rep.OpenUnknowns[0].Operation, "oldest first")
		require.Equal(t, domain.ExecUnknown, rep.OpenUnknowns[0].State)
		require.Equal(t, domain.TypeOutcomeUnknown, rep.OpenUnknowns[0].Via)
		require.Equal(t, opEscalated, rep.OpenUnknowns[1].Operation)
		require.Equal(t, domain.ExecEscalated, rep.OpenUnknowns[1].State)
		require.Contains(t, text.String(), "audit verify: OK")

		var js bytes.Buffer
		require.NoError(t, rep.WriteJSON(&js))
		require.Contains(t, js.String(), `"violations": []`)
	})
}

// TestVerifyWindows: a range starting mid-log judges its events with their
// streams' history, and finds a violation only when the range holds it.
func TestVerifyWindows(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		waitVisible(t, store, n)
		all, err := store.ReadAll(context.Background(), nil, int(n))
		require.NoError(t, err)
		mid := all[n/2].Position

		rep := verify(t, store, n, audit.VerifyOptions{From: mid})
		require.True(t, rep.OK(), "%+v", rep.Violations)
		require.Equal(t, n-n/2-1, rep.Events)
		require.Positive(t, rep.PrimedEvents)
		require.Equal(t, int64(2), rep.OpenUnknownCount)

		rep = verify(t, store, n, audit.VerifyOptions{To: mid})
		require.True(t, rep.OK(), "%+v", rep.Violations)
		require.Equal(t, n/2+1, rep.Events)

		// A double consumption written after the story: outside [start, mid], inside (mid, end].
		h := newHistory(t, store, opHappy)
		h.next = streamLength(t, store, opHappy.StreamName())
		z := claim(opHappy, "EXE-Z", "CAP-5001", "MSG-Z", "worker-z", 1, t0)
		z.LeaseSecretDigest = domain.LeaseSecretDigest("z") // bound like the story's claims: only the double consumption is wrong
		h.by("worker-z", "MSG-Z", z)
		rep = verify(t, store, n+1, audit.VerifyOptions{To: mid})
		require.True(t, rep.OK())
		rep = verify(t, store, n+1, audit.VerifyOptions{From: mid})
		require.Equal(t, []string{"I1", "I2", "I3"}, invariantIDs(rep))
	})
}

// TestVerifyBoundsOpenOperations: past MaxOpenOperations Verify stops with
// an error rather than grow, and its partial report says so.
func TestVerifyBoundsOpenOperations(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, store eventstore.Store) {
		n := newStory(t, store).write()
		waitVisible(t, store, n)
		rep, err := audit.Verify(context.Background(), store, audit.VerifyOptions{MaxOpenOperations: 1, PageSize: 7})
		require.ErrorIs(t, err, audit.ErrLimitExceeded)
		require.False(t, rep.Complete)
		require.False(t, rep.OK())
		require.Contains(t, err.Error(), "MaxOpenOperations")
	})
}
