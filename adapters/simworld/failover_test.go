package simworld_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/simworld"
)

// An append in flight when the primary is lost may have committed; the
// statement it sent carried the head its connection knew, so it commits
// only where the stream still holds that event. This schedule (seed
// 7153736692049476047's 83rd, shrunk) loses OP-1's claim in a lossy
// failover; the stream grows back to the claim's version (the agent
// revokes), and the worker's outcome, in flight across a second
// failover, must not land on the revocation: it recorded an outcome for an
// execution the log no longer held, and audit verify could not read OP-1.
func TestAnAppendInFlightAcrossAFailoverMeetsTheHeadCheck(t *testing.T) {
	spec, err := simworld.ParseSpec("s1.39eff872cad78deb.o4.n120.f395b50ba7c.k20,21,22,23,24,25")
	require.NoError(t, err)
	res, err := simworld.Run(t.Context(), spec, simworld.Options{Timeline: true})
	require.NoError(t, err)
	tl := strings.Join(res.Timeline, "\n")
	require.Contains(t, tl, "failover to an asynchronous standby: 2 transactions (2 events) lost of [evidence-OP-4 operation-OP-1]")
	require.Contains(t, tl, "agent revokes CAP-1.1 → ok")
	require.Contains(t, tl, "w2: append operation-OP-1 reset by the failover")
	require.Empty(t, res.Violations)
}
