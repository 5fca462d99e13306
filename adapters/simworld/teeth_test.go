//go:build simbugs

package simworld_test

import (
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
	"opledger/domain/simbug"
)

// The simulator's teeth: each known bug, planted alone (go test -tags
// simbugs), is caught within a stated number of schedules of a sweep, its
// failing schedule shrinks and replays, and the same schedule passes once
// the bug is gone. docs/simulation.md gives how fast each is caught over
// many seeds; the bounds here hold for the default seed (and, with margin,
// for any: OPLEDGER_SIM_SEED overrides it).
//
//	go test -tags simbugs -run TestPlantedBugs ./adapters/simworld/
var teeth = []struct {
	bug    simbug.Bug
	within int // schedules
}{
	// over 30 seeds (TestPlantedBugsMeasure): median, p90, max schedules
	{simbug.SkipOperationBarrier, 100},   // 3, 13, 14
	{simbug.ResetConsumedCapability, 50}, // 2, 5, 8
	{simbug.FreshKeyPerResend, 50},       // 1, 3, 6
	{simbug.TimeoutAsNotApplied, 600},    // 23, 75, 87
	{simbug.StaleEpochAccepted, 300},     // 12, 29, 54
	{simbug.LeaseSecretUnchecked, 50},    // 3, 7, 8
	// only schedules with store-failover-lossy can show it
	{simbug.StateCacheTrustsShorterStream, 200}, // 8, 33, 42
}

func TestPlantedBugs(t *testing.T) {
	seed := uint64(1)
	if s := os.Getenv("OPLEDGER_SIM_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = n
	}
	require.Len(t, teeth, len(simbug.All), "every bug of the registry has its tooth")
	for _, tc := range teeth {
		t.Run(string(tc.bug), func(t *testing.T) {
			sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{
				Seed: seed, Schedules: tc.within, Ops: 4, Faults: simworld.AllFaults, Bug: tc.bug,
				StopAtFirst: true, Shrink: true, MaxShrinkRuns: 80,
			})
			require.NoError(t, err)
			f := sum.First
			require.NotNil(t, f, "%s not caught within %d schedules of seed %d", tc.bug, tc.within, seed)
			t.Logf("%s caught at schedule %d of seed %d by %v; shrunk in %d runs to %s", tc.bug, f.Index+1, seed, checksOf(f.Violations), f.ShrinkRuns, f.Shrunk)

			shrunk, err := simworld.ParseSpec(f.Shrunk)
			require.NoError(t, err)
			again, err := simworld.Run(t.Context(), shrunk, simworld.Options{})
			require.NoError(t, err)
			require.False(t, again.OK(), "the shrunk schedule replays its violation")
			require.Equal(t, f.Result.TraceHash, again.TraceHash, "and the same trace")

			shrunk.Bug = ""
			clean, err := simworld.Run(t.Context(), shrunk, simworld.Options{})
			require.NoError(t, err)
			require.True(t, clean.OK(), "without the bug the same schedule passes: %v", clean.Violations)
		})
	}
}

func checksOf(vs []simworld.Violation) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vs {
		if !seen[v.Check] {
			seen[v.Check] = true
			out = append(out, v.Check)
		}
	}
	return out
}

// TestPlantedBugsMeasure measures how many schedules each bug needs over
// many seeds (docs/simulation.md quotes it):
//
//	OPLEDGER_SIM_MEASURE=50 go test -tags simbugs -run TestPlantedBugsMeasure -v ./adapters/simworld/
func TestPlantedBugsMeasure(t *testing.T) {
	seeds, _ := strconv.Atoi(os.Getenv("OPLEDGER_SIM_MEASURE"))
	if seeds == 0 {
		t.Skip("set OPLEDGER_SIM_MEASURE to the number of seeds")
	}
	for _, tc := range teeth {
		var needed []int
		missed := 0
		for seed := range seeds {
			sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{
				Seed: uint64(1000 + seed), Schedules: 2000, Ops: 4, Faults: simworld.AllFaults, Bug: tc.bug, StopAtFirst: true,
			})
			require.NoError(t, err)
			if sum.First == nil {
				missed++
				continue
			}
			needed = append(needed, sum.First.Index+1)
		}
		slices.Sort(needed)
		pick := func(q float64) int {
			if len(needed) == 0 {
				return 0
			}
			return needed[min(len(needed)-1, int(q*float64(len(needed))))]
		}
		t.Logf("%-26s seeds %d: median %d, p90 %d, max %d schedules; missed in 2000: %d", tc.bug, seeds, pick(0.5), pick(0.9), pick(1), missed)
	}
}
