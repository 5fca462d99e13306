package domain

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// fixture is an operation folded from the events its test decided.
type fixture struct {
	t  *testing.T
	op *Operation
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, op: NewOperation()}
	f.apply(f.op.Request(RequestOperation{
		OperationID: "OP-4471", OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: "COR-2210",
	}, t0))
	return f
}

func (f *fixture) apply(events []Event, err error) []Event {
	f.t.Helper()
	require.NoError(f.t, err)
	for _, e := range events {
		require.NoError(f.t, f.op.Evolve(e))
		f.op.Version++
	}
	return events
}

func (f *fixture) record(events []Event) {
	f.t.Helper()
	for _, e := range events {
		require.NoError(f.t, f.op.Evolve(e))
		f.op.Version++
	}
}

var okFacts = Facts{OrderRefundable: true, RefundedMinor: 0}

func (f *fixture) allow(id DecisionID, policy KeyPolicy) Decided {
	f.t.Helper()
	ev := f.apply(f.op.Decide(Decide{DecisionID: id, Approver: "agent-7", ApprovalLimitMinor: 50000, Facts: okFacts, KeyPolicy: policy}, t0))
	d := ev[0].(Decided)
	require.Equal(f.t, Allowed, d.Verdict, d.Reasons)
	return d
}

func (f *fixture) issue(id CapabilityID, at time.Time) CapabilityIssued {
	f.t.Helper()
	return f.apply(f.op.IssueCapability(IssueCapability{CapabilityID: id}, at))[0].(CapabilityIssued)
}

func (f *fixture) claim(msg MessageID, capID CapabilityID, exe ExecutionID, at time.Time) ClaimResult {
	f.t.Helper()
	r, err := f.op.Claim(Claim{MessageID: msg, CapabilityID: capID, WorkerID: "worker-a", ExecutionID: exe, LeaseSecretDigest: LeaseSecretDigest(secretOf(exe))}, at)
	require.NoError(f.t, err)
	f.record(r.Events)
	return r
}

// secretOf is the lease secret the fixture's claims hand to execution exe
// (the command handler mints random ones; the model only sees digests).
func secretOf(exe ExecutionID) string { return "secret-of-" + string(exe) }

func TestClaimOpensExecutionUnderLeaseWithDecisionKey(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-3381", "")
	f.issue("CAP-91F", t0)
	r := f.claim("MSG-55A", "CAP-91F", "EXE-1", t0.Add(3*time.Second))
	require.Equal(t, StatusClaimed, r.Status)
	require.Equal(t, IdempotencyKey("refund-OP-4471-a1"), r.Claimed.IdempotencyKey)
	require.Equal(t, int64(1), r.Claimed.LeaseEpoch)
	require.Equal(t, t0.Add(3*time.Second+DefaultLeaseDuration), r.Claimed.LeaseExpiresAt)
	require.Equal(t, LeaseSecretDigest(secretOf("EXE-1")), r.Claimed.LeaseSecretDigest)
	require.Equal(t, []HeldLease{{Epoch: 1, SecretDigest: LeaseSecretDigest(secretOf("EXE-1"))}}, f.op.Execution("EXE-1").HeldLeases)
	require.Equal(t, CapConsumed, f.op.Capabilities["CAP-91F"].State)
	require.Equal(t, OpExecuting, f.op.Status())
}

func TestClaimCheckOrder(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-A", t0)
	f.issue("CAP-B", t0)
	f.issue("CAP-C", t0)
	f.issue("CAP-R", t0)
	f.apply(f.op.RevokeCapability(RevokeCapability{CapabilityID: "CAP-R"}, t0))
	require.Equal(t, StatusClaimed, f.claim("MSG-1", "CAP-A", "EXE-1", t0).Status)

	cases := []struct {
		name    string
		msg     MessageID
		capID   CapabilityID
		at      time.Time
		status  ClaimStatus
		reason  Reason
		replay  bool
		bindOp  OperationID
		bindAtt int
	}{
		{"seen message wins over everything", "MSG-1", "CAP-R", t0, StatusDuplicateDelivery, ReasonDeliveryDuplicate, false, "", 0},
		{"spent authority on a new message is a replay", "MSG-2", "CAP-A", t0, StatusAlreadyConsumed, ReasonCapabilityAlreadyConsumed, true, "", 0},
		{"spent authority stays spent after expiry", "MSG-3", "CAP-A", t0.Add(time.Hour), StatusAlreadyConsumed, ReasonCapabilityAlreadyConsumed, true, "", 0},
		{"unknown capability", "MSG-4", "CAP-NOPE", t0, StatusInvalid, ReasonCapabilityInvalid, false, "", 0},
		{"token bound elsewhere", "MSG-5", "CAP-B", t0, StatusInvalid, ReasonCapabilityWrongOperation, false, "OP-1", 0},
		{"token names another attempt", "MSG-6", "CAP-B", t0, StatusInvalid, ReasonCapabilityWrongAttempt, false, "", 2},
		{"revoked", "MSG-7", "CAP-R", t0, StatusRevoked, ReasonCapabilityRevoked, false, "", 0},
		{"expired unused", "MSG-8", "CAP-B", t0.Add(DefaultCapabilityTTL), StatusExpired, ReasonCapabilityExpired, false, "", 0},
		{"valid but the operation is executing", "MSG-9", "CAP-C", t0, StatusOperationNotExecutable, ReasonOperationExecuting, false, "", 0},
	}
	for _, c := range cases {
		before := f.op.Execution("EXE-1").State
		r, err := f.op.Claim(Claim{MessageID: c.msg, CapabilityID: c.capID, WorkerID: "w", ExecutionID: "EXE-X", BoundOperation: c.bindOp, BoundAttempt: c.bindAtt, LeaseSecretDigest: LeaseSecretDigest("x")}, c.at)
		require.NoError(t, err, c.name)
		require.Equal(t, c.status, r.Status, c.name)
		require.Equal(t, c.reason, r.Reason, c.name)
		require.Equal(t, c.replay, r.ReplaySuspected, c.name)
		require.False(t, r.ExecutionAttempted, c.name)
		require.Len(t, r.Events, 1, c.name)
		f.record(r.Events)
		require.Equal(t, before, f.op.Execution("EXE-1").State, "%s: a refusal changes no execution", c.name)
		require.Len(t, f.op.Executions, 1, c.name)
	}
	require.Equal(t, CapIssued, f.op.Capabilities["CAP-C"].State, "a barrier refusal does not spend the capability")
}

func TestSecondCapabilityWhileUnknownStaysUnspent(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Unknown, Detail: "timeout"}, t0))
	f.issue("CAP-2", t0) // someone reissues authority instead of reconciling
	r := f.claim("MSG-2", "CAP-2", "EXE-2", t0)
	require.Equal(t, StatusOperationNotExecutable, r.Status)
	require.Equal(t, ReasonOperationOutcomeUnknown, r.Reason)
	require.Equal(t, CapIssued, f.op.Capabilities["CAP-2"].State)
	require.Len(t, f.op.Executions, 1)
}

func TestLeaseFencing(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)

	_, err := f.op.LapseLease(LapseLease{ExecutionID: "EXE-1"}, t0.Add(DefaultLeaseDuration-time.Nanosecond))
	requireReason(t, err, ReasonLeaseActive)
	f.apply(f.op.LapseLease(LapseLease{ExecutionID: "EXE-1"}, t0.Add(DefaultLeaseDuration)))
	x := f.op.Execution("EXE-1")
	require.Equal(t, ExecUnknown, x.State)
	require.Equal(t, int64(2), x.LeaseEpoch)

	// the stale executor's writes are refused, and the refusal is evidence
	ev, err := f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Completed, ProviderReference: "re_1"}, t0)
	requireReason(t, err, ReasonLeaseLost)
	require.IsType(t, WriteRefused{}, ev[0])
	require.Equal(t, "re_1", ev[0].(WriteRefused).ProviderReference)
	_, err = f.op.RenewLease(RenewLease{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1")}, t0)
	requireReason(t, err, ReasonLeaseLost)

	// its late result may only resolve its own Unknown execution
	_, err = f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 3, LeaseSecret: secretOf("EXE-1"), Outcome: Completed}, t0)
	requireReason(t, err, ReasonLeaseLost)
	_, err = f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-9", LeaseEpoch: 1, Outcome: Completed}, t0)
	requireReason(t, err, ReasonExecutionUnknown)
	f.apply(f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Completed, ProviderReference: "re_1"}, t0))
	require.Equal(t, ExecCompleted, x.State)
	_, err = f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: NotApplied}, t0)
	requireReason(t, err, ReasonExecutionNotUnknown)
}

func TestNewAttemptNeedsNewDecisionAndCapability(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", KeyPerAttempt)
	f.issue("CAP-1", t0)
	f.issue("CAP-1B", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: NotApplied}, t0))
	require.Equal(t, OpNotApplied, f.op.Status())

	// the unused capability of attempt 1 cannot start attempt 2
	r := f.claim("MSG-2", "CAP-1B", "EXE-2", t0)
	require.Equal(t, StatusInvalid, r.Status)
	require.Equal(t, ReasonCapabilityWrongAttempt, r.Reason)
	_, err := f.op.IssueCapability(IssueCapability{CapabilityID: "CAP-X"}, t0)
	requireReason(t, err, ReasonDecisionNotAllowed)

	d := f.allow("DEC-2", KeyPerAttempt)
	require.Equal(t, 2, d.Attempt)
	require.Equal(t, IdempotencyKey("refund-OP-4471-a2"), d.IdempotencyKey)
	f.issue("CAP-2", t0)
	r = f.claim("MSG-3", "CAP-2", "EXE-2", t0)
	require.Equal(t, StatusClaimed, r.Status)
	require.Equal(t, 2, r.Claimed.Attempt)
	require.Equal(t, CapConsumed, f.op.Capabilities["CAP-1"].State, "spent authority is never reset")
}

func TestReuseFirstKeyPolicyKeepsAttemptOneKey(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", KeyReuseFirst)
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: NotApplied}, t0))
	d := f.allow("DEC-2", KeyReuseFirst)
	require.Equal(t, 2, d.Attempt)
	require.Equal(t, IdempotencyKey("refund-OP-4471-a1"), d.IdempotencyKey)
}

func TestChangedFactsDenyAndIssueNothing(t *testing.T) {
	f := newFixture(t)
	ev := f.apply(f.op.Decide(Decide{DecisionID: "DEC-9", Approver: "a", ApprovalLimitMinor: 100,
		Facts: Facts{OrderRefundable: false, ChargebackOpen: true, RefundedMinor: 10000}}, t0))
	d := ev[0].(Decided)
	require.Equal(t, Denied, d.Verdict)
	require.ElementsMatch(t, []string{
		string(ReasonPolicyOrderNotRefundable), string(ReasonPolicyOverApprovalLimit),
		string(ReasonPolicyChargebackOpen), string(ReasonPolicyExceedsOrderTotal),
	}, d.Reasons)
	_, err := f.op.IssueCapability(IssueCapability{CapabilityID: "CAP-1"}, t0)
	requireReason(t, err, ReasonDecisionNotAllowed)
}

func TestDuplicateDeliveryReportsButNeverChangesExecution(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	r := f.claim("MSG-1", "CAP-1", "EXE-2", t0.Add(2*DefaultLeaseDuration)) // even with the lease long expired
	require.Equal(t, StatusDuplicateDelivery, r.Status)
	require.Equal(t, ExecExecuting, r.ExecutionState)
	require.Equal(t, ExecExecuting, f.op.Execution("EXE-1").State)
	require.Equal(t, int64(1), f.op.Execution("EXE-1").LeaseEpoch)
}

func TestDecideRefusedWhileOutcomeOpen(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	_, err := f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts}, t0)
	requireReason(t, err, ReasonOperationExecuting)
	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Unknown}, t0))
	_, err = f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts}, t0)
	requireReason(t, err, ReasonOperationOutcomeUnknown)
	f.apply(f.op.Escalate(Escalate{ExecutionID: "EXE-1", Reason: "cannot tell"}, t0))
	require.Equal(t, OpEscalated, f.op.Status())
	_, err = f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts}, t0)
	requireReason(t, err, ReasonOperationOutcomeUnknown)
	f.apply(f.op.Reconcile(Reconcile{ExecutionID: "EXE-1", Outcome: Completed, Method: MethodOperator, Actor: "ops-1"}, t0))
	_, err = f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts}, t0)
	requireReason(t, err, ReasonOperationCompleted)
	_, err = f.op.Reconcile(Reconcile{ExecutionID: "EXE-1", Outcome: NotApplied, Method: MethodOperator, Actor: "ops-1"}, t0)
	requireReason(t, err, ReasonExecutionNotUnknown)
}

func TestIdentifiersAreValidated(t *testing.T) {
	_, err := ParseOperationID("CAP-1")
	require.ErrorIs(t, err, ErrInvalidID)
	_, err = ParseOperationID("OP-")
	require.ErrorIs(t, err, ErrInvalidID)
	_, err = ParseMessageID("has space")
	require.ErrorIs(t, err, ErrInvalidID)
	id, err := ParseCapabilityID("CAP-91F")
	require.NoError(t, err)
	require.Equal(t, CapabilityID("CAP-91F"), id)
	require.Equal(t, "operation-OP-4471", OperationID("OP-4471").StreamName())
}

func TestEvolveRefusesImpossibleHistory(t *testing.T) {
	op := NewOperation()
	require.Error(t, op.Evolve(Claimed{ExecutionID: "EXE-1"}), "an event before OperationRequested")
	f := newFixture(t)
	require.Error(t, f.op.Evolve(Claimed{ExecutionID: "EXE-1", CapabilityID: "CAP-NONE"}))
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	require.Error(t, f.op.Evolve(Claimed{ExecutionID: "EXE-2", CapabilityID: "CAP-1"}), "a capability consumed twice")
}

func requireReason(t *testing.T, err error, reason Reason) {
	t.Helper()
	var r *Refusal
	require.True(t, errors.As(err, &r), "want refusal %s, got %v", reason, err)
	require.Equal(t, reason, r.Reason, r.Detail)
}

func TestChildIDsNameTheirOperation(t *testing.T) {
	id := ChildID(PrefixExecution, "OP-4471", 2)
	require.Equal(t, "EXE-4471.2", id)
	op, ok := OperationOf(id)
	require.True(t, ok)
	require.Equal(t, OperationID("OP-4471"), op)
	op, ok = OperationOf(ChildID(PrefixCapability, "OP-a.b.c", 11))
	require.True(t, ok)
	require.Equal(t, OperationID("OP-a.b.c"), op)
	for _, bad := range []string{"EXE-4471", "EXE-.1", "EXE-4471.", "EXE-4471.x", "MSG-1.1"} {
		_, ok := OperationOf(bad)
		require.False(t, ok, bad)
	}
}

func TestDecideAndIssueIsOneDecision(t *testing.T) {
	f := newFixture(t)
	ev := f.apply(f.op.DecideAndIssue(Decide{DecisionID: "DEC-1", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts}, IssueCapability{CapabilityID: "CAP-1"}, t0))
	require.Len(t, ev, 2)
	require.Equal(t, DecisionID("DEC-1"), ev[1].(CapabilityIssued).DecisionID)
	f2 := newFixture(t)
	ev = f2.apply(f2.op.DecideAndIssue(Decide{DecisionID: "DEC-1", Approver: "a", ApprovalLimitMinor: 1, Facts: okFacts}, IssueCapability{CapabilityID: "CAP-1"}, t0))
	require.Len(t, ev, 1, "a denial issues nothing")
	require.Empty(t, f2.op.Capabilities)
}
