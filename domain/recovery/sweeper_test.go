package recovery_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
)

// One operation whose stream cannot be folded among healthy ones: every
// healthy expired lease is lapsed in the same sweep, which returns no error;
// the poisoned execution is tried Policy.MaxAttempts times, each after its
// backoff, then set aside with its reason and left alone until released.
func TestSweeperGoesOnPastAPoisonedOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	healthy := []domain.OperationID{"OP-H1", "OP-H2", "OP-H3"}
	claims := map[domain.OperationID]*domain.Claimed{}
	claims["OP-P"] = f.executing("OP-P") // the oldest lease: first in the index's order
	for _, op := range healthy {
		claims[op] = f.executing(op)
	}
	f.corrupt("OP-P")
	f.expire()
	s := f.sweeper(nil)
	poisoned := string(claims["OP-P"].ExecutionID)

	lapsed, err := s.SweepOnce(f.ctx)
	require.NoError(t, err, "one item's failure is not the sweep's")
	require.Equal(t, len(healthy), lapsed)
	for _, op := range healthy {
		x := f.execution(op, claims[op].ExecutionID)
		require.Equal(t, domain.ExecUnknown, x.State, op)
		require.Equal(t, int64(2), x.LeaseEpoch, op)
	}
	it, found := f.item(setaside.RoleSweeper, poisoned)
	require.True(t, found)
	require.Equal(t, 1, it.Attempts)
	require.Equal(t, recovery.ReasonStreamCorrupt, it.Reason)
	require.Equal(t, domain.OperationID("OP-P"), it.OperationID)
	require.Contains(t, it.Detail, "corrupt")
	require.False(t, it.SetAside)

	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, lapsed)
	it, _ = f.item(setaside.RoleSweeper, poisoned)
	require.Equal(t, 1, it.Attempts, "backing off: not tried before its RetryAt")

	for attempt := 2; attempt <= testPolicy.MaxAttempts; attempt++ {
		f.clock.Advance(testPolicy.MaxBackoff)
		_, err := s.SweepOnce(f.ctx)
		require.NoError(t, err)
		it, _ = f.item(setaside.RoleSweeper, poisoned)
		require.Equal(t, attempt, it.Attempts)
	}
	require.True(t, it.SetAside, "set aside once MaxAttempts tries failed")
	require.Len(t, f.setAside(setaside.RoleSweeper), 1)
	require.Len(t, f.seen.of(setaside.RoleSweeper, poisoned), testPolicy.MaxAttempts, "every failure is reported")

	f.clock.Advance(time.Hour)
	_, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	it, _ = f.item(setaside.RoleSweeper, poisoned)
	require.Equal(t, testPolicy.MaxAttempts, it.Attempts, "a set-aside item is not tried again")

	// New work is still swept, and a release makes the sweeper try again.
	late := f.executing("OP-H4")
	f.expire()
	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed)
	require.Equal(t, domain.ExecUnknown, f.execution("OP-H4", late.ExecutionID).State)
	require.NoError(t, f.failing.Clear(f.ctx, setaside.RoleSweeper, poisoned))
	_, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	it, found = f.item(setaside.RoleSweeper, poisoned)
	require.True(t, found)
	require.Equal(t, 1, it.Attempts, "released: counted from one again")
	for _, e := range f.events("OP-P") {
		require.NotEqual(t, domain.TypeLeaseLapsed, e.EventType(), "the sweeper never wrote to the poisoned stream")
	}
}

// More failing candidates than one batch, all older than one healthy
// candidate: the keyset walk reaches the healthy one within
// ceil((failing+1)/batch) sweeps; once the failing ones are set aside, a
// new healthy candidate behind them is reached in the first sweep (held
// candidates do not count against the batch).
func TestSweeperIsNotStarvedByFailingCandidates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const batch, failing = 2, 5
	var poisoned []domain.OperationID
	for i := range failing {
		op := domain.OperationID(fmt.Sprintf("OP-P%d", i))
		f.executing(op)
		f.corrupt(op)
		poisoned = append(poisoned, op)
		f.clock.Advance(time.Second) // distinct expiries: the failing ones come first
	}
	healthy := f.executing("OP-H")
	f.expire()
	s := f.sweeper(func(c *recovery.SweeperConfig) { c.BatchSize = batch })

	rounds := 0
	for f.execution("OP-H", healthy.ExecutionID).State != domain.ExecUnknown {
		rounds++
		require.LessOrEqual(t, rounds, (failing+1+batch-1)/batch, "the healthy candidate was starved")
		_, err := s.SweepOnce(f.ctx)
		require.NoError(t, err)
	}

	for range 50 { // bounded: each item needs MaxAttempts tries
		if len(f.setAside(setaside.RoleSweeper)) == failing {
			break
		}
		f.clock.Advance(testPolicy.MaxBackoff)
		_, err := s.SweepOnce(f.ctx)
		require.NoError(t, err)
	}
	require.Len(t, f.setAside(setaside.RoleSweeper), failing)

	late := f.executing("OP-H2")
	f.expire()
	lapsed, err := s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed, "five set-aside candidates ahead of it do not use up a batch of two")
	require.Equal(t, domain.ExecUnknown, f.execution("OP-H2", late.ExecutionID).State)
	for _, op := range poisoned {
		it, _ := f.item(setaside.RoleSweeper, "EXE-"+string(op)[3:]+".1")
		require.Equal(t, testPolicy.MaxAttempts, it.Attempts, op)
	}
}

// The sweeper acts on a lease's expiry by the clock only: a duplicate
// delivery of the claim's message changes nothing, a running lease is left
// alone up to its last instant, and it lapses at expiry, once.
func TestSweeperLapsesOnlyExpiredLeases(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := f.executing("OP-1")
	s := f.sweeper(nil)

	dup, err := f.h.Claim(f.ctx, "OP-1", domain.Claim{MessageID: c.MessageID, CapabilityID: c.CapabilityID, WorkerID: "worker-b"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Status)
	lapsed, err := s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, lapsed, "a duplicate delivery is not a lapse")

	f.clock.Advance(c.LeaseExpiresAt.Sub(f.clock.Now()) - time.Nanosecond)
	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, lapsed, "the lease runs until its expiry")
	x := f.execution("OP-1", c.ExecutionID)
	require.Equal(t, domain.ExecExecuting, x.State)
	require.Equal(t, int64(1), x.LeaseEpoch)

	f.clock.Advance(time.Nanosecond)
	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed)
	x = f.execution("OP-1", c.ExecutionID)
	require.Equal(t, domain.ExecUnknown, x.State)
	require.Equal(t, int64(2), x.LeaseEpoch)

	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Zero(t, lapsed, "lapsed once")
	require.Empty(t, f.seen.items, "nothing failed")
}

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

// An unreachable store is an outage, not the items' failure: the sweep
// stops after a few candidates, nothing is recorded, and the next sweep
// after the outage handles them all. One stream unreachable while others
// are served is that item's failure.
func TestSweeperTellsAnOutageFromAnItemFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	var claims []*domain.Claimed
	for i := range 6 {
		claims = append(claims, f.executing(domain.OperationID(fmt.Sprintf("OP-%d", i))))
	}
	f.expire()
	s := f.sweeper(nil)

	f.store.setAllDown(true)
	lapsed, err := s.SweepOnce(f.ctx)
	require.Error(t, err, "an outage is reported")
	require.Zero(t, lapsed)
	counts, err := f.failing.Counts(f.ctx)
	require.NoError(t, err)
	require.Empty(t, counts, "no healthy item is blamed for the database's restart")

	f.store.setAllDown(false)
	f.store.setDown(domain.OperationID("OP-3").StreamName(), true)
	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 5, lapsed, "the walk resumed where the outage stopped it")
	it, found := f.item(setaside.RoleSweeper, string(claims[3].ExecutionID))
	require.True(t, found)
	require.Equal(t, recovery.ReasonStoreUnavailable, it.Reason)

	f.store.setDown(domain.OperationID("OP-3").StreamName(), false)
	f.clock.Advance(testPolicy.MaxBackoff)
	lapsed, err = s.SweepOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, lapsed)
	_, found = f.item(setaside.RoleSweeper, string(claims[3].ExecutionID))
	require.False(t, found, "handled: its failures are cleared")
}
