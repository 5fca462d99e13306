package domain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCloneSharesNothing(t *testing.T) {
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	o := NewOperation()
	for _, e := range []Event{
		OperationRequested{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR", OrderTotalMinor: 1000, RequestedAt: at},
		Decided{DecisionID: "DEC-1.1", Verdict: Allowed, Attempt: 1, DecidedAt: at},
		CapabilityIssued{CapabilityID: "CAP-1.1", DecisionID: "DEC-1.1", Attempt: 1, IssuedAt: at, ExpiresAt: at.Add(time.Hour)},
		Claimed{ExecutionID: "EXE-1.1", CapabilityID: "CAP-1.1", MessageID: "MSG-1", Attempt: 1, LeaseEpoch: 1, LeaseSecretDigest: "sha256:00", ClaimedAt: at},
	} {
		require.NoError(t, o.Evolve(e))
	}
	c := o.Clone()
	require.Equal(t, o, c)

	require.NoError(t, c.Evolve(OutcomeRecorded{ExecutionID: "EXE-1.1", Outcome: Completed, RecordedAt: at}))
	c.Capabilities["CAP-1.1"].State = CapRevoked
	c.Executions[0].HeldLeases[0].Epoch = 9
	c.Messages["MSG-2"] = struct{}{}
	c.Decisions[0].Verdict = Denied

	require.Equal(t, ExecExecuting, o.Executions[0].State)
	require.Equal(t, CapConsumed, o.Capabilities["CAP-1.1"].State)
	require.Equal(t, int64(1), o.Executions[0].HeldLeases[0].Epoch)
	require.NotContains(t, o.Messages, MessageID("MSG-2"))
	require.Equal(t, Allowed, o.Decisions[0].Verdict)
}
