package recovery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
)

// renewingIndex renews a lease right after the index answered: the
// candidate is stale by the time the sweeper acts on it.
type renewingIndex struct {
	recovery.Index
	renew func()
}

func (x renewingIndex) ExpiredLeases(ctx context.Context, now time.Time, after recovery.Cursor, limit int) ([]recovery.ExecutionRef, error) {
	refs, err := x.Index.ExpiredLeases(ctx, now, after, limit)
	x.renew()
	return refs, err
}

// A lease renewed between the index's answer and the lapse is skipped, not
// lapsed and not counted as a failure.
func TestSweeperSkipsALeaseRenewedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := f.executing("OP-1")
	other := f.executing("OP-2")
	f.expire()
	renewed := false
	s := f.sweeper(func(cfg *recovery.SweeperConfig) {
		cfg.Index = renewingIndex{Index: f.index, renew: func() {
			if renewed {
				return
			}
			renewed = true
			_, err := f.h.RenewLease(f.ctx, "OP-1", domain.RenewLease{ExecutionID: c.ExecutionID, LeaseEpoch: 1,
				LeaseSecret: f.secrets[c.ExecutionID], WorkerID: "worker-a"}, ledger.Cause{Actor: "worker-a"})
			require.NoError(t, err)
		}}
	})
	lapsed, err := s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed, "only the other lease lapsed")
	require.Equal(t, domain.ExecUnknown, f.execution("OP-2", other.ExecutionID).State)
	x := f.execution("OP-1", c.ExecutionID)
	require.Equal(t, domain.ExecExecuting, x.State)
	require.Equal(t, int64(1), x.LeaseEpoch, "the renewed lease keeps its epoch")
	require.Empty(t, f.seen.items, "a renewed lease is a skip, not a failure")
}
