package recovery_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// An event the log index cannot decode, ahead of healthy work in the log:
// the index answers from what it read before it (no query fails), tries it
// again after each backoff, and once it is set aside (with its reason, role
// log-index) reads past it, so the healthy execution behind it is found and
// swept.
func TestLogIndexReadsPastAnUndecodableEventOnceSetAside(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	before := f.executing("OP-1")
	bogus := uuid.NewString()
	_, err := f.store.Append(f.ctx, domain.OperationID("OP-1").StreamName(), eventstore.Any(),
		[]eventstore.EventData{{ID: bogus, Type: "Bogus", Data: []byte(`{}`), Metadata: []byte(`{"schema_version":1}`)}})
	require.NoError(t, err)
	after := f.executing("OP-2")
	f.expire()
	s := f.sweeper(nil)

	found := func() []domain.ExecutionID {
		refs, err := f.index.ExpiredLeases(f.ctx, f.clock.Now(), recovery.Cursor{}, 10)
		require.NoError(t, err, "an undecodable event fails no query")
		out := make([]domain.ExecutionID, len(refs))
		for i, r := range refs {
			out[i] = r.ExecutionID
		}
		return out
	}
	require.Equal(t, []domain.ExecutionID{before.ExecutionID}, found(), "the index stops before the event it cannot decode")
	require.Equal(t, []domain.ExecutionID{before.ExecutionID}, found(), "and does not try it again before its backoff")
	require.Len(t, f.seen.of(setaside.RoleLogIndex, bogus), 1)

	for attempt := 2; attempt <= testPolicy.MaxAttempts; attempt++ {
		f.clock.Advance(testPolicy.MaxBackoff)
		got := found()
		require.Len(t, f.seen.of(setaside.RoleLogIndex, bogus), attempt)
		if attempt < testPolicy.MaxAttempts {
			require.Equal(t, []domain.ExecutionID{before.ExecutionID}, got)
		}
	}
	require.Equal(t, []domain.ExecutionID{before.ExecutionID, after.ExecutionID}, found(), "read past once set aside")
	listed := f.setAside(setaside.RoleLogIndex)
	require.Len(t, listed, 1)
	require.Equal(t, bogus, listed[0].Item)
	require.Equal(t, recovery.ReasonEventUndecodable, listed[0].Reason)
	require.Equal(t, domain.OperationID("OP-1"), listed[0].OperationID)

	// The sweeper reaches the execution behind it; the one whose stream
	// holds the event is its own role's item failure.
	lapsed, err := s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed)
	require.Equal(t, domain.ExecUnknown, f.execution("OP-2", after.ExecutionID).State)
	it, ok := f.item(setaside.RoleSweeper, string(before.ExecutionID))
	require.True(t, ok)
	require.Equal(t, recovery.ReasonStreamCorrupt, it.Reason)
}
