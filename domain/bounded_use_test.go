package domain

import (
	"testing"

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
