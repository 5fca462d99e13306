package simworld_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
)

// The same spec takes the same steps: same trace, same result.
func TestScheduleIsDeterministic(t *testing.T) {
	for i := range 5 {
		spec := simworld.Spec{Seed: simworld.ScheduleSeed(20261126, i), Ops: 4, Faults: simworld.AllFaults, Steps: simworld.DefaultSteps(4)}
		a, err := simworld.Run(t.Context(), spec, simworld.Options{Timeline: true})
		require.NoError(t, err)
		b, err := simworld.Run(t.Context(), spec, simworld.Options{Timeline: true})
		require.NoError(t, err)
		require.Equal(t, a.Timeline, b.Timeline, "schedule %s", spec)
		require.Equal(t, a.TraceHash, b.TraceHash)
		require.Equal(t, a.Faults, b.Faults)
		require.Equal(t, a.Violations, b.Violations)
		require.Greater(t, a.Steps, 0)
		// A different seed is a different schedule.
		other := spec
		other.Seed++
		c, err := simworld.Run(t.Context(), other, simworld.Options{})
		require.NoError(t, err)
		require.NotEqual(t, a.TraceHash, c.TraceHash)
	}
}

// A sweep's summary does not depend on how many schedules run at once.
func TestSweepIsDeterministicWhateverTheParallelism(t *testing.T) {
	o := simworld.SweepOptions{Seed: 99, Schedules: 24, Ops: 3, Faults: simworld.AllFaults, Parallel: 1}
	one, err := simworld.Sweep(t.Context(), o)
	require.NoError(t, err)
	o.Parallel = 3
	three, err := simworld.Sweep(t.Context(), o)
	require.NoError(t, err)
	require.Equal(t, one.TraceHash, three.TraceHash)
	require.Equal(t, one.FaultsInjected, three.FaultsInjected)
	require.Equal(t, one.Steps, three.Steps)
}

func TestSpecRoundTrip(t *testing.T) {
	spec := simworld.Spec{Seed: 0xdeadbeef, Ops: 3, Faults: simworld.AllFaults.Without(simworld.FaultClockJump), Steps: 77, Skip: []int{2, 9}}
	back, err := simworld.ParseSpec(spec.String())
	require.NoError(t, err)
	require.Equal(t, spec, back)
	for _, bad := range []string{"", "s1", "s2.1.o1.n1.f1", "s1.zz.o1.n1.f1", "s1.1.o0.n1.f1", "s1.1.o1.n1.f1.k0", "s1.1.o1.n1.f1.bnope", "s1.1.o1.n1.f1.x3"} {
		_, err := simworld.ParseSpec(bad)
		require.Error(t, err, bad)
	}
}

func TestParseFaults(t *testing.T) {
	all, err := simworld.ParseFaults("all")
	require.NoError(t, err)
	require.Equal(t, simworld.AllFaults, all)
	store, err := simworld.ParseFaults("store-*")
	require.NoError(t, err)
	require.Equal(t, []simworld.Fault{simworld.FaultStoreReadFail, simworld.FaultStoreWriteFail, simworld.FaultStoreCommitLost, simworld.FaultStoreOutage,
		simworld.FaultStoreFailover, simworld.FaultStoreFailoverLossy}, store.List())
	most, err := simworld.ParseFaults("-clock-jump,-provider-*")
	require.NoError(t, err)
	require.False(t, most.Has(simworld.FaultClockJump))
	require.False(t, most.Has(simworld.FaultProviderHold))
	require.True(t, most.Has(simworld.FaultWorkerCrash))
	none, err := simworld.ParseFaults("none")
	require.NoError(t, err)
	require.Zero(t, none)
	_, err = simworld.ParseFaults("store-*,bogus")
	require.ErrorContains(t, err, `"bogus"`)
}

// Every goroutine of a schedule (roles, renewals, handlers) has returned
// once Run returns: a sweep of thousands leaves nothing behind.
func TestSchedulesLeaveNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{Seed: 3, Schedules: 30, Ops: 3, Faults: simworld.AllFaults})
	require.NoError(t, err)
	require.Equal(t, 30, sum.Schedules)
	// Poll, bounded: the runtime may still be reaping goroutines that returned.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before+2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines left behind")
}

// Liveness without faults: every schedule is quiet (every operation
// Completed, or Denied over the approval limit) almost at once after the
// chaos phase, well inside the bound.
func TestNoFaultSchedulesSettleAtOnce(t *testing.T) {
	sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{Seed: 11, Schedules: 60, Ops: 4, Faults: 0})
	require.NoError(t, err)
	require.Zero(t, sum.Violations)
	require.Empty(t, sum.FaultsInjected)
	settle, err := time.ParseDuration(sum.SettleMax)
	require.NoError(t, err)
	require.Less(t, settle, time.Minute, "the longest settle phase")
	require.Less(t, sum.SettleStepsMax, 100)
}
