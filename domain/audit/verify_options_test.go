package audit_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/audit"
	"opledger/eventstore/memory"
)

func TestVerifyRefusesBadOptions(t *testing.T) {
	store := memory.New(nil)
	for _, opts := range []audit.VerifyOptions{
		{PageSize: audit.MaxPageSize + 1},
		{PageSize: -1},
		{MaxViolations: -1},
		{From: memory.Position(5), To: memory.Position(2)},
	} {
		_, err := audit.Verify(context.Background(), store, opts)
		require.Error(t, err, "%+v", opts)
	}
}

// TestVerifyStopsWithItsContext: a run whose context ends, or that reaches
// MaxEvents, reports an error and a partial report that is not OK, never a
// clean bill.
func TestVerifyStopsWithItsContext(t *testing.T) {
	store := memory.New(nil)
	h := newHistory(t, store, "OP-1")
	h.claimed()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := audit.Verify(ctx, store, audit.VerifyOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, rep.Complete)
	require.False(t, rep.OK())

	// A log longer than MaxEvents ends the run the same way.
	rep, err = audit.Verify(context.Background(), store, audit.VerifyOptions{MaxEvents: 2, PageSize: 2})
	require.ErrorIs(t, err, audit.ErrLimitExceeded)
	require.False(t, rep.OK())
	require.Equal(t, int64(2), rep.Events)
}
