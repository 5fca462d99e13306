package recovery_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
)

// An export download's Unknown use is reconciled against the
// export-delivery service by the same capability rules as a refund:
// lookup by our reference (every use's deliveries are there, each under
// its own key), retrieve by key, resend inside the retention, escalate
// otherwise. Checked on the simulator's ledger of deliveries.

// exports returns a client of the simulator's export-delivery service.
func (f *fixture) exports() *provider.ExportClient {
	f.t.Helper()
	srv := httptest.NewServer(f.sim)
	f.t.Cleanup(srv.Close)
	x, err := provider.NewExportClient(provider.Config{BaseURL: srv.URL, MaxAttempts: 1, Timeout: 10 * time.Second, Logger: f.log})
	require.NoError(f.t, err)
	return x
}

// downloads requests an export download of uses uses and issues its
// capability.
func (f *fixture) downloads(op domain.OperationID, uses int) domain.CapabilityID {
	f.t.Helper()
	_, err := f.h.RequestOperation(f.ctx, domain.RequestOperation{OperationID: op, Kind: domain.KindExportDownload,
		ExportID: "EXP-" + string(op), CorrelationID: domain.CorrelationID("COR-" + string(op))}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	_, c, err := f.h.DecideAndIssue(f.ctx, op, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: uses},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	return c.CapabilityID
}

// claimUse claims the next use of c on msg.
func (f *fixture) claimUse(op domain.OperationID, c domain.CapabilityID, msg domain.MessageID) *domain.Claimed {
	f.t.Helper()
	out, err := f.h.Claim(f.ctx, op, domain.Claim{MessageID: msg, CapabilityID: c, WorkerID: "worker-a"})
	require.NoError(f.t, err)
	require.Equal(f.t, domain.StatusClaimed, out.Status, "%s: %s", msg, out.Reason)
	f.secrets[out.ExecutionID] = out.LeaseSecret
	return out.Claimed
}

// deliver sends use c's delivery through x, as a worker would.
func (f *fixture) deliver(x *provider.ExportClient, op domain.OperationID, c *domain.Claimed) domain.EffectResult {
	return x.DeliverExport(f.ctx, domain.ExportDelivery{OperationID: op, ExportID: "EXP-" + string(op), Use: c.Use, IdempotencyKey: c.IdempotencyKey})
}

func (f *fixture) record(op domain.OperationID, c *domain.Claimed, r domain.EffectResult) {
	f.t.Helper()
	require.NoError(f.t, f.h.RecordOutcome(f.ctx, op, domain.RecordOutcome{ExecutionID: c.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: f.secrets[c.ExecutionID], Outcome: r.Outcome, ProviderReference: r.ProviderReference}, ledger.Cause{Actor: "worker-a"}))
}

func (f *fixture) exportReconciler(x *provider.ExportClient) *recovery.Reconciler {
	return f.reconciler(func(c *recovery.ReconcilerConfig) { c.Exports, c.ExportProfile = x, provider.ExportsV1 })
}

// TestAnUnknownUseIsFoundAmongTheOtherUses: use 1 delivered and recorded,
// use 2 delivered with its answer lost (Unknown): the lookup by operation
// finds both deliveries; use 1's under its own key is not a second effect
// of use 2, and use 2's is Completed. Nothing is delivered again, and the
// next use opens only then.
func TestAnUnknownUseIsFoundAmongTheOtherUses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	x := f.exports()
	capID := f.downloads("OP-5120", 3)
	c1 := f.claimUse("OP-5120", capID, "MSG-DL-1")
	f.record("OP-5120", c1, f.deliver(x, "OP-5120", c1))
	c2 := f.claimUse("OP-5120", capID, "MSG-DL-2")
	require.NoError(t, f.sim.Arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: "OP-5120"}))
	require.Equal(t, domain.Unknown, f.deliver(x, "OP-5120", c2).Outcome)
	f.expire()
	f.lapse("OP-5120", c2.ExecutionID)

	out, err := f.h.Claim(f.ctx, "OP-5120", domain.Claim{MessageID: "MSG-DL-3", CapabilityID: capID, WorkerID: "worker-a"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusOperationNotExecutable, out.Status, "Unknown blocks the next use")

	steps, err := f.exportReconciler(x).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-5120": recovery.VerdictCompleted}, verdicts(steps))
	r := f.reconciled("OP-5120")
	require.Equal(t, domain.MethodProviderLookup, r.Method)
	require.Contains(t, r.Evidence, "found by operation id")
	l := f.sim.Ledger()
	require.Equal(t, 2, l.ByOperation["OP-5120"].ExportsDelivered, "nothing delivered again")
	require.Equal(t, map[string]int{string(c1.IdempotencyKey): 1, string(c2.IdempotencyKey): 1}, l.DeliveriesByKey)
	require.Equal(t, 2, l.ExportRequests)

	c3 := f.claimUse("OP-5120", capID, "MSG-DL-4")
	require.Equal(t, 3, c3.Use, "once reconciled, the next use opens")
}

// TestAnUnknownUseNeverSentIsResentUnderItsKey: nothing under the use's
// key (the worker died before sending): inside the service's retention a
// resend under the same key is safe, and is made once.
func TestAnUnknownUseNeverSentIsResentUnderItsKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	x := f.exports()
	capID := f.downloads("OP-5120", 2)
	c1 := f.claimUse("OP-5120", capID, "MSG-DL-1")
	f.expire()
	f.lapse("OP-5120", c1.ExecutionID)
	steps, err := f.exportReconciler(x).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-5120": recovery.VerdictCompleted}, verdicts(steps))
	require.Equal(t, domain.MethodProviderResend, f.reconciled("OP-5120").Method)
	require.Equal(t, map[string]int{string(c1.IdempotencyKey): 1}, f.sim.Ledger().DeliveriesByKey)
	require.Zero(t, f.sim.Ledger().RequestsReceived, "the refund provider heard nothing")
}

// TestAnUnknownUseWithoutTheServiceIsEscalated: a reconciler that has no
// export-delivery service cannot tell, and escalates without asking anyone.
func TestAnUnknownUseWithoutTheServiceIsEscalated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	capID := f.downloads("OP-5120", 2)
	c1 := f.claimUse("OP-5120", capID, "MSG-DL-1")
	f.expire()
	f.lapse("OP-5120", c1.ExecutionID)
	steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-5120": recovery.VerdictEscalated}, verdicts(steps))
	require.Contains(t, steps[0].Detail, "no executor of export-download operations")
	require.Equal(t, domain.ExecEscalated, f.execution("OP-5120", c1.ExecutionID).State)
	l := f.sim.Ledger()
	require.Zero(t, l.ExportRequests+l.RequestsReceived+l.Lookups, "nobody was asked")
}

// TestADeliveryUnderAKeyNoUseHasIsEscalated: the service shows a delivery
// of the operation under a key no execution has (a second effect nobody
// accounts for): a person must look.
func TestADeliveryUnderAKeyNoUseHasIsEscalated(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	x := f.exports()
	capID := f.downloads("OP-5120", 2)
	c1 := f.claimUse("OP-5120", capID, "MSG-DL-1")
	stray := domain.ExportDelivery{OperationID: "OP-5120", ExportID: "EXP-OP-5120", Use: 9, IdempotencyKey: "export-OP-5120-fresh"}
	require.Equal(t, domain.Completed, x.DeliverExport(f.ctx, stray).Outcome)
	f.expire()
	f.lapse("OP-5120", c1.ExecutionID)
	steps, err := f.exportReconciler(x).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-5120": recovery.VerdictEscalated}, verdicts(steps))
	require.Contains(t, steps[0].Detail, `delivery dl_sim00000001 under another key "export-OP-5120-fresh" took effect`)
}
