package domain

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A stale executor's NotApplied cannot resolve its Unknown execution: it
// knows only its own requests, and after the lapse the reconciler may have
// resent the execution's request under the same key (the simulator found
// exactly that: the executor's send was refused at connect, the
// reconciler's resend created the refund, the late NotApplied then let a new
// attempt start). It is refused and recorded; only the provider settles it.
func TestLateNotAppliedCannotResolveUnknown(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", KeyPerAttempt)
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	lapsed := t0.Add(DefaultLeaseDuration)
	f.apply(f.op.LapseLease(LapseLease{ExecutionID: "EXE-1"}, lapsed))

	ev, err := f.op.RecordLateOutcome(RecordLateOutcome{
		ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: NotApplied, Detail: "connection refused, nothing sent",
	}, lapsed)
	requireReason(t, err, ReasonLateNotApplied)
	require.Len(t, ev, 1)
	refused := ev[0].(WriteRefused)
	require.Equal(t, NotApplied, refused.Outcome)
	require.Equal(t, SecretHeld, refused.SecretCheck, "the holder's own evidence, kept")
	require.Equal(t, "connection refused, nothing sent", refused.Detail)
	f.record(ev)
	require.Equal(t, ExecUnknown, f.op.Execution("EXE-1").State)
	_, err = f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "agent", ApprovalLimitMinor: 1_000_000, Facts: Facts{OrderRefundable: true}}, lapsed)
	requireReason(t, err, ReasonOperationOutcomeUnknown)

	// Escalated is Unknown for safety: the same.
	f.apply(f.op.Escalate(Escalate{ExecutionID: "EXE-1", Reason: "reconciliation.cannot-tell"}, lapsed))
	_, err = f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: NotApplied}, lapsed)
	requireReason(t, err, ReasonLateNotApplied)

	// Its Completed still settles it: an effect is an effect, whoever's
	// request made it.
	f.apply(f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Completed, ProviderReference: "re_1"}, lapsed))
	require.Equal(t, ExecCompleted, f.op.Execution("EXE-1").State)
}
