package simworld

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileSweepFaults: every kind but store-failover-lossy, as the CI sweep.
var hostileSweepFaults = AllFaults.Without(FaultStoreFailoverLossy)

// The holder-under-flood check has teeth: with a defect planted in the
// hostile caller's connection — its evidence appended to the operation's
// stream instead of beside it — a sweep fails the check, and the failing
// schedule passes without the defect.
func TestHolderUnderFloodCatchesEvidenceOnTheOperationStream(t *testing.T) {
	planted := Options{hostileEvidenceOnOpStream: true}
	sum, err := Sweep(t.Context(), SweepOptions{Seed: 1, Schedules: 60, Ops: 4, Faults: hostileSweepFaults, StopAtFirst: true, Run: planted})
	require.NoError(t, err)
	require.NotNil(t, sum.First, "the planted defect is caught within 60 schedules")
	require.Contains(t, checksOf(sum.First.Violations), CheckHolderUnderFlood)

	spec, err := ParseSpec(sum.First.Spec)
	require.NoError(t, err)
	clean, err := Run(t.Context(), spec, Options{})
	require.NoError(t, err)
	require.True(t, clean.OK(), "without the defect the same schedule passes: %v", clean.Violations)
	require.Positive(t, clean.HostilePresentations)
}

// With the same defect, a holder whose append meets an event the hostile
// caller wrote on its operation's stream is reported as delayed by the
// flood (not only the event found in the log at the end).
func TestHolderUnderFloodReportsTheDelay(t *testing.T) {
	planted := Options{hostileEvidenceOnOpStream: true}
	for i := range 200 {
		spec := Spec{Seed: ScheduleSeed(7, i), Ops: 4, Faults: hostileSweepFaults, Steps: DefaultSteps(4)}
		r, err := Run(t.Context(), spec, planted)
		require.NoError(t, err)
		for _, v := range r.Violations {
			if v.Check == CheckHolderUnderFlood && strings.Contains(v.Detail, "under a hostile flood met") {
				t.Logf("schedule %d (%s): %s", i, spec, v.Detail)
				return
			}
		}
	}
	t.Fatal("no holder delayed by the planted defect in 200 schedules of seed 7")
}

func checksOf(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Check)
	}
	return out
}

// TestASummaryOfRefusalsMadeBeforeAClockLeap: a hostile flood's refusals
// stamped before the clock leapt a day are counted, past the bound, in the
// window the evidence stream keeps after the leap (domain.EvidenceLog.Admit
// counts a refusal whose own window is not kept in a kept one), and audit
// verify accepts the summary holding them outside its window. The schedule
// is CI's sweep seed 5696073087888394710, schedule 982, shrunk; audit
// verify refused it (I14) before it applied the ledger's rule.
func TestASummaryOfRefusalsMadeBeforeAClockLeap(t *testing.T) {
	spec, err := ParseSpec("s1.49096abb65033edb.o4.n160.f567bf3c591.k16,19,34,35,36,37,38,39,40")
	require.NoError(t, err)
	res, err := Run(t.Context(), spec, Options{Timeline: true})
	require.NoError(t, err)
	tl := strings.Join(res.Timeline, "\n")
	require.Contains(t, tl, "hostile flood #1 on OP-2")
	require.Contains(t, tl, "the clock leaps 27h32m28.417239731s")
	require.Empty(t, res.Violations)
}
