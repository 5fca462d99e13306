package simworld_test

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
)

// The CI sweep. scripts/test.sh runs it without the race detector
// (OPLEDGER_SIM_SCHEDULES=2000 by default there); under -race (go test
// -race ./...) it runs fewer schedules, for the races, not the coverage.
//
//	OPLEDGER_SIM_SEED       the sweep's seed (default: random, printed)
//	OPLEDGER_SIM_SCHEDULES  how many schedules (default 2000; 150 under -race)
//	OPLEDGER_SIM_LONG       TestSweepLong's schedules (unset: skipped)

func sweepSeed(t *testing.T) uint64 {
	if s := os.Getenv("OPLEDGER_SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "OPLEDGER_SIM_SEED")
		return seed
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) >> 1
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, name)
	return n
}

// sweepFaults are the kinds the CI sweep injects: every one.
func sweepFaults(t *testing.T) simworld.FaultSet {
	f, err := simworld.ParseFaults("all")
	require.NoError(t, err)
	return f
}

// sweep runs a sweep and fails the test with the first violation, shrunk,
// as a timeline and the command that replays it.
func sweep(t *testing.T, schedules int) simworld.Summary {
	seed := sweepSeed(t)
	t.Logf("sweep seed %d (OPLEDGER_SIM_SEED=%d reproduces it), %d schedules", seed, seed, schedules)
	sum, err := simworld.Sweep(t.Context(), simworld.SweepOptions{
		Seed: seed, Schedules: schedules, Ops: 4, Faults: sweepFaults(t), Shrink: true,
	})
	require.NoError(t, err)
	t.Logf("%d schedules, %.1f/s, %d steps, faults %v", sum.Schedules, sum.SchedulesPerS, sum.Steps, sum.FaultsInjected)
	t.Logf("%d schedules with a lossy failover: %d LogRegressed recorded, %d lost effects escalated",
		sum.LossySchedules, sum.RegressionsRecorded, sum.LostEffectsEscalated)
	if sum.SecondRefundsAfterLoss > 0 {
		t.Logf("%d schedules with a second refund after a lossy failover, one of the two escalated (docs/simulation.md, finding 4), e.g. %s",
			sum.SecondRefundsAfterLoss, sum.SecondRefundExample)
	}
	if f := sum.First; f != nil {
		var b strings.Builder
		for _, l := range f.Result.Timeline {
			b.WriteString(l + "\n")
		}
		t.Errorf("schedule %d of seed %d failed: %v\nshrunk to %s:\n%s\nreplay: opledger sim --replay %s",
			f.Index, seed, f.Violations, f.Shrunk, b.String(), f.Shrunk)
	}
	require.Zero(t, sum.Violations, "schedules with a violation")
	require.Equal(t, schedules, sum.Schedules)
	return sum
}

func TestSweep(t *testing.T) {
	def := 2000
	if raceEnabled {
		def = 150
	}
	sum := sweep(t, envInt(t, "OPLEDGER_SIM_SCHEDULES", def))
	// The sweep must have exercised what it claims to: every kind of fault
	// struck somewhere (a sweep of this size draws each kind many times).
	if sum.Schedules >= 1000 {
		for _, f := range simworld.Faults {
			require.Positive(t, sum.FaultsInjected[f], "fault %s never injected in %d schedules", f, sum.Schedules)
		}
	}
}

// TestSweepLong is the longer sweep: OPLEDGER_SIM_LONG=50000 go test -run
// TestSweepLong ./adapters/simworld/ (about 15 minutes on two cores).
func TestSweepLong(t *testing.T) {
	n := envInt(t, "OPLEDGER_SIM_LONG", 0)
	if n == 0 {
		t.Skip("set OPLEDGER_SIM_LONG to the number of schedules")
	}
	sweep(t, n)
}
