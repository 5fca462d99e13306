package domain

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// newExportFixture is an export-download operation, OP-5120, delivering
// export EXP-7781.
func newExportFixture(t *testing.T) *fixture {
	f := &fixture{t: t, op: NewOperation()}
	f.apply(f.op.Request(RequestOperation{
		OperationID: "OP-5120", Kind: KindExportDownload, ExportID: "EXP-7781", CorrelationID: "COR-5120",
	}, t0))
	return f
}

// allowDownloads decides uses downloads Allowed and issues the capability.
func (f *fixture) allowDownloads(dec DecisionID, capID CapabilityID, uses int) (Decided, CapabilityIssued) {
	f.t.Helper()
	ev := f.apply(f.op.DecideAndIssue(Decide{DecisionID: dec, Approver: "agent-7", ExportFacts: ExportFacts{ExportReady: true}, Uses: uses},
		IssueCapability{CapabilityID: capID}, t0))
	require.Len(f.t, ev, 2)
	return ev[0].(Decided), ev[1].(CapabilityIssued)
}

func (f *fixture) finish(exe ExecutionID, outcome Outcome) {
	f.t.Helper()
	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: exe, LeaseEpoch: 1, LeaseSecret: secretOf(exe), Outcome: outcome}, t0))
}

func TestAnExportIsRequestedByItsExportAlone(t *testing.T) {
	f := newExportFixture(t)
	require.Equal(t, KindExportDownload, f.op.Kind)
	require.Equal(t, "EXP-7781", f.op.ExportID)
	require.True(t, f.op.Policy.Repeats)

	for _, c := range []struct {
		cmd   RequestOperation
		field string
	}{
		{RequestOperation{Kind: KindExportDownload, CorrelationID: "COR-1"}, "export_id"},
		{RequestOperation{Kind: KindExportDownload, ExportID: "EXP 1", CorrelationID: "COR-1"}, "export_id"},
		{RequestOperation{Kind: KindExportDownload, ExportID: "EXP-1", OrderID: "ORD-1", CorrelationID: "COR-1"}, "order_id"},
		{RequestOperation{Kind: KindExportDownload, ExportID: "EXP-1", AmountMinor: 100, CorrelationID: "COR-1"}, "amount_minor"},
		{RequestOperation{Kind: KindRefund, ExportID: "EXP-1", OrderID: "ORD-1", AmountMinor: 1, Currency: "EUR", CorrelationID: "COR-1"}, "export_id"},
		{RequestOperation{Kind: "download-all", ExportID: "EXP-1", CorrelationID: "COR-1"}, "kind"},
	} {
		c.cmd.OperationID = "OP-9"
		_, err := NewOperation().Request(c.cmd, t0)
		var r *Refusal
		require.ErrorAs(t, err, &r, "%+v", c.cmd)
		require.Equal(t, ReasonCommandInvalid, r.Reason)
		require.Equal(t, c.field, r.Field, r.Detail)
	}
}

func TestAnExportDecisionAuthorizesBoundedUses(t *testing.T) {
	f := newExportFixture(t)
	d, c := f.allowDownloads("DEC-1", "CAP-1", 3)
	require.Equal(t, Allowed, d.Verdict)
	require.Equal(t, KindExportDownload, d.Kind)
	require.Equal(t, ExportPolicyVersion, d.PolicyVersion)
	require.Equal(t, 3, d.Uses)
	require.Equal(t, IdempotencyKey("export-OP-5120-a1"), d.IdempotencyKey)
	require.Equal(t, &ExportFacts{ExportReady: true}, d.ExportFacts)
	require.Equal(t, Facts{}, d.Facts)
	require.Equal(t, 3, c.Uses)
	require.Equal(t, KindExportDownload, c.Kind)
	require.Equal(t, OpAuthorized, f.op.Status())

	denied := f.apply(f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "agent-7", Uses: 2}, t0))[0].(Decided)
	require.Equal(t, Denied, denied.Verdict)
	require.Equal(t, []string{string(ReasonPolicyExportNotReady)}, denied.Reasons)

	for _, c := range []struct {
		cmd   Decide
		field string
	}{
		{Decide{Approver: "a", ExportFacts: ExportFacts{ExportReady: true}}, "uses"},
		{Decide{Approver: "a", ExportFacts: ExportFacts{ExportReady: true}, Uses: MaxExportDownloads + 1}, "uses"},
		{Decide{Approver: "a", ExportFacts: ExportFacts{ExportReady: true}, Uses: -1}, "uses"},
		{Decide{Approver: "a", ExportFacts: ExportFacts{ExportReady: true}, Uses: 2, ApprovalLimitMinor: 5}, "approval_limit_minor"},
		{Decide{Approver: "a", Facts: Facts{OrderRefundable: true}, Uses: 2}, "facts"},
		{Decide{Approver: "a", ExportFacts: ExportFacts{ExportReady: true}, Uses: 2, KeyPolicy: KeyReuseFirst}, "key_policy"},
	} {
		c.cmd.DecisionID = "DEC-9"
		_, err := f.op.Decide(c.cmd, t0)
		var r *Refusal
		require.ErrorAs(t, err, &r)
		require.Equal(t, c.field, r.Field, r.Detail)
	}
}

func TestARefundStaysSingleUse(t *testing.T) {
	f := newFixture(t)
	for _, cmd := range []Decide{
		{DecisionID: "DEC-9", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts, Uses: 3},
		{DecisionID: "DEC-9", Approver: "a", ApprovalLimitMinor: 50000, Facts: okFacts, ExportFacts: ExportFacts{ExportReady: true}},
	} {
		_, err := f.op.Decide(cmd, t0)
		var r *Refusal
		require.ErrorAs(t, err, &r)
		require.Contains(t, []string{"uses", "facts.export_ready"}, r.Field, r.Detail)
	}
	d := f.allow("DEC-1", "")
	require.Equal(t, 1, d.Uses)
	require.Equal(t, KindRefund, d.Kind)
	c := f.issue("CAP-1", t0)
	require.Equal(t, 1, c.Uses)
	r := f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	require.Equal(t, 1, r.Use)
	require.Equal(t, 0, r.UsesLeft)
	require.Equal(t, IdempotencyKey("refund-OP-4471-a1"), r.Claimed.IdempotencyKey, "a refund's key has no use suffix")
}

// TestEachUseIsOneClaimWithItsOwnKey: N uses, N claims, each its own
// execution and key (operation, attempt, use); the (N+1)-th presentation
// is AlreadyConsumed, replay suspected, and opens nothing.
func TestEachUseIsOneClaimWithItsOwnKey(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 3)
	keys := map[IdempotencyKey]bool{}
	for use := 1; use <= 3; use++ {
		exe := ExecutionID(fmt.Sprintf("EXE-%d", use))
		r := f.claim(MessageID(fmt.Sprintf("MSG-%d", use)), "CAP-1", exe, t0.Add(time.Duration(use)*time.Second))
		require.Equal(t, StatusClaimed, r.Status)
		require.Equal(t, use, r.Use)
		require.Equal(t, use, r.Claimed.Use)
		require.Equal(t, 3-use, r.UsesLeft)
		require.Equal(t, IdempotencyKey(fmt.Sprintf("export-OP-5120-a1-u%d", use)), r.Claimed.IdempotencyKey)
		require.False(t, keys[r.Claimed.IdempotencyKey])
		keys[r.Claimed.IdempotencyKey] = true
		require.Equal(t, 1, r.Claimed.Attempt, "every use is of the decision's attempt")
		if use < 3 {
			require.Equal(t, CapIssued, f.op.Capabilities["CAP-1"].State)
		}
		f.finish(exe, Completed)
	}
	require.Equal(t, CapConsumed, f.op.Capabilities["CAP-1"].State)
	require.Equal(t, 0, f.op.Capabilities["CAP-1"].UsesLeft())
	require.Equal(t, OpCompleted, f.op.Status())

	r := f.claim("MSG-4", "CAP-1", "EXE-4", t0.Add(time.Minute))
	require.Equal(t, StatusAlreadyConsumed, r.Status)
	require.Equal(t, ReasonCapabilityAlreadyConsumed, r.Reason)
	require.True(t, r.ReplaySuspected)
	require.Nil(t, r.Claimed)
	rej := r.Events[0].(PresentationRejected)
	require.False(t, rej.ExecutionAttempted)
	require.Equal(t, "all 3 uses consumed, the last by message MSG-3", rej.Detail)
	require.Len(t, f.op.Executions, 3)
}

// TestOneExecutionOpenAtATime: a use presented while another execution is
// Executing, Unknown or Escalated is refused without spending it; Unknown
// blocks the next use until it is reconciled.
func TestOneExecutionOpenAtATime(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 2)
	require.Equal(t, StatusClaimed, f.claim("MSG-1", "CAP-1", "EXE-1", t0).Status)

	r := f.claim("MSG-2", "CAP-1", "EXE-2", t0)
	require.Equal(t, StatusOperationNotExecutable, r.Status)
	require.Equal(t, ReasonOperationExecuting, r.Reason)
	require.Equal(t, 2, f.op.Capabilities["CAP-1"].Uses-f.op.Capabilities["CAP-1"].Claims+1, "the refused presentation spent nothing")
	require.Equal(t, 1, f.op.Capabilities["CAP-1"].UsesLeft())

	f.apply(f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Unknown, Detail: "timeout"}, t0))
	r = f.claim("MSG-3", "CAP-1", "EXE-2", t0)
	require.Equal(t, StatusOperationNotExecutable, r.Status)
	require.Equal(t, ReasonOperationOutcomeUnknown, r.Reason)
	_, err := f.op.Decide(Decide{DecisionID: "DEC-2", Approver: "a", ExportFacts: ExportFacts{ExportReady: true}, Uses: 1}, t0)
	requireRefusal(t, err, ReasonOperationOutcomeUnknown)

	f.apply(f.op.Escalate(Escalate{ExecutionID: "EXE-1", Reason: "cannot-tell"}, t0))
	require.Equal(t, StatusOperationNotExecutable, f.claim("MSG-4", "CAP-1", "EXE-2", t0).Status)

	f.apply(f.op.Reconcile(Reconcile{ExecutionID: "EXE-1", Outcome: Completed, Method: MethodOperator, Actor: "ops-1"}, t0))
	r = f.claim("MSG-5", "CAP-1", "EXE-2", t0)
	require.Equal(t, StatusClaimed, r.Status, "once reconciled, the next use opens")
	require.Equal(t, 2, r.Use)
	require.Equal(t, IdempotencyKey("export-OP-5120-a1-u2"), r.Claimed.IdempotencyKey)
}

// TestANotAppliedUseStillConsumedItsUse: a use that ended NotApplied counts
// against the capability (authority is counted in claims, never given
// back); the remaining uses stay usable; once every use is spent, trying
// again needs a new decision, whose attempt is the next one.
func TestANotAppliedUseStillConsumedItsUse(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 2)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.finish("EXE-1", NotApplied)
	require.Equal(t, 1, f.op.Capabilities["CAP-1"].UsesLeft(), "the NotApplied use is not given back")
	require.Equal(t, OpAuthorized, f.op.Status())
	f.claim("MSG-2", "CAP-1", "EXE-2", t0)
	f.finish("EXE-2", NotApplied)
	require.Equal(t, CapConsumed, f.op.Capabilities["CAP-1"].State)
	require.Equal(t, OpNotApplied, f.op.Status())
	require.Equal(t, StatusAlreadyConsumed, f.claim("MSG-3", "CAP-1", "EXE-3", t0).Status)

	_, err := f.op.IssueCapability(IssueCapability{CapabilityID: "CAP-2"}, t0)
	requireRefusal(t, err, ReasonDecisionNotAllowed)

	d, _ := f.allowDownloads("DEC-2", "CAP-2", 1)
	require.Equal(t, 2, d.Attempt)
	r := f.claim("MSG-4", "CAP-2", "EXE-3", t0)
	require.Equal(t, StatusClaimed, r.Status)
	require.Equal(t, IdempotencyKey("export-OP-5120-a2-u1"), r.Claimed.IdempotencyKey, "a new attempt, new keys")
	require.Equal(t, StatusAlreadyConsumed, f.claim("MSG-5", "CAP-1", "EXE-4", t0).Status, "the spent capability stays spent")
}

// TestACompletedUseDoesNotEndAnExport: unlike a refund, a Completed use
// leaves the other uses usable, and a new decision may follow once every
// execution ended.
func TestACompletedUseDoesNotEndAnExport(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 2)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.finish("EXE-1", Completed)
	require.Equal(t, OpAuthorized, f.op.Status())
	r := f.claim("MSG-2", "CAP-1", "EXE-2", t0)
	require.Equal(t, StatusClaimed, r.Status)
	require.Equal(t, 0, r.UsesLeft)
	f.finish("EXE-2", Completed)

	_, err := f.op.IssueCapability(IssueCapability{CapabilityID: "CAP-X"}, t0)
	requireRefusal(t, err, ReasonDecisionNotAllowed)
	d, _ := f.allowDownloads("DEC-2", "CAP-2", 1)
	require.Equal(t, 2, d.Attempt)
}

// TestAPartlyUsedCapabilityIsRevoked: revoking withdraws the uses left.
func TestAPartlyUsedCapabilityIsRevoked(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 3)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	f.finish("EXE-1", Completed)
	f.apply(f.op.RevokeCapability(RevokeCapability{CapabilityID: "CAP-1", Reason: "export withdrawn"}, t0))
	require.Equal(t, 0, f.op.Capabilities["CAP-1"].UsesLeft())
	r := f.claim("MSG-2", "CAP-1", "EXE-2", t0)
	require.Equal(t, StatusRevoked, r.Status)
}

func TestEvolveRefusesAUseOutOfOrderOrOfAnotherKind(t *testing.T) {
	f := newExportFixture(t)
	f.allowDownloads("DEC-1", "CAP-1", 2)
	claim := Claimed{ExecutionID: "EXE-1", CapabilityID: "CAP-1", Kind: KindExportDownload, MessageID: "MSG-1", WorkerID: "w",
		Attempt: 1, Use: 2, LeaseEpoch: 1, ClaimedAt: t0}
	require.ErrorContains(t, f.op.Evolve(claim), "claim of use 2 of capability CAP-1, whose next use is 1")
	claim.Use, claim.Kind = 1, KindRefund
	require.ErrorContains(t, f.op.Evolve(claim), "a Claimed event of kind refund on a export-download operation")
	claim.Use, claim.Kind = 0, ""
	require.ErrorContains(t, f.op.Evolve(claim), "whose next use is", "an unstated use is no use of a kind of bounded use")

	require.ErrorContains(t, f.op.Evolve(CapabilityIssued{CapabilityID: "CAP-9", DecisionID: "DEC-1", Kind: KindExportDownload, Uses: MaxExportDownloads + 1}),
		"capability CAP-9 of 11 uses")
	require.ErrorContains(t, NewOperation().Evolve(OperationRequested{OperationID: "OP-1", Kind: "teleport"}), `kind "teleport", which this build does not know`)
}

func requireRefusal(t *testing.T, err error, reason Reason) {
	t.Helper()
	var r *Refusal
	require.ErrorAs(t, err, &r)
	require.Equal(t, reason, r.Reason, r.Detail)
}
