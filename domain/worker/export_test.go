package worker_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// exportRig is an export download of uses uses, OP-5120 of export EXP-7781,
// on the rig's world, with the simulator's export-delivery service.
func (r *rig) exportRig(uses int) (domain.OperationID, domain.CapabilityID, *sim.Simulator, *provider.ExportClient) {
	r.t.Helper()
	ctx := r.t.Context()
	op := domain.OperationID("OP-5120")
	_, err := r.h.RequestOperation(ctx, domain.RequestOperation{
		OperationID: op, Kind: domain.KindExportDownload, ExportID: "EXP-7781", CorrelationID: "COR-5120",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(r.t, err)
	_, c, err := r.h.DecideAndIssue(ctx, op, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: uses},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	require.NoError(r.t, err)
	s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV1, Clock: r.clk.Now})
	require.NoError(r.t, err)
	srv := httptest.NewServer(s)
	r.t.Cleanup(func() { srv.Close(); s.Close() })
	x, err := provider.NewExportClient(provider.Config{BaseURL: srv.URL, MaxAttempts: 1, Timeout: 10 * time.Second})
	require.NoError(r.t, err)
	return op, c.CapabilityID, s, x
}

// TestAWorkerDeliversEachUseOnce: each presentation of the export's
// capability is one use: claimed, delivered by the export-delivery service
// under the use's own key, recorded; the fourth presentation of three uses
// is refused and delivers nothing. Checked on the service's ledger.
func TestAWorkerDeliversEachUseOnce(t *testing.T) {
	r := newRig(t)
	op, capID, s, exports := r.exportRig(3)
	refunds := newFakeProvider(nil)
	w, err := worker.New(worker.Config{ID: "worker-a", Ledger: r.h, Provider: refunds, Exports: exports, Clock: r.clk,
		Logger: quiet(t), LeaseDuration: lease, ProviderTimeout: 30 * time.Second, After: r.after})
	require.NoError(t, err)
	for n := 1; n <= 4; n++ {
		res, err := w.Handle(t.Context(), worker.Delivery{MessageID: domain.MessageID(fmt.Sprintf("MSG-DL-%d", n)), OperationID: op, CapabilityID: capID})
		require.NoError(t, err)
		if n == 4 {
			require.Equal(t, domain.StatusAlreadyConsumed, res.Claim.Status)
			require.True(t, res.Claim.ReplaySuspected)
			require.False(t, res.Executed)
			continue
		}
		require.Equal(t, domain.StatusClaimed, res.Claim.Status)
		require.Equal(t, n, res.Claim.Use)
		require.Equal(t, 3-n, res.Claim.UsesLeft)
		require.Equal(t, domain.Completed, res.Outcome)
		require.Equal(t, "outcome", res.Recorded)
	}
	l := s.Ledger()
	require.Equal(t, 3, l.ByOperation[string(op)].ExportsDelivered)
	require.Equal(t, map[string]int{"export-OP-5120-a1-u1": 1, "export-OP-5120-a1-u2": 1, "export-OP-5120-a1-u3": 1}, l.DeliveriesByKey)
	require.Zero(t, l.RefundsCreated)
	calls, _ := refunds.snapshot()
	require.Zero(t, calls, "an export download never reaches the refund provider")
}

// TestAWorkerWithoutAnExportExecutorSendsNothing: the use is claimed (its
// authority spent) and recorded NotApplied: provably nothing was sent.
func TestAWorkerWithoutAnExportExecutorSendsNothing(t *testing.T) {
	r := newRig(t)
	op, capID, s, _ := r.exportRig(2)
	w := r.worker(newFakeProvider(nil))
	res, err := w.Handle(t.Context(), worker.Delivery{MessageID: "MSG-DL-1", OperationID: op, CapabilityID: capID})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, res.Claim.Status)
	require.Equal(t, domain.NotApplied, res.Outcome)
	require.Equal(t, domain.ExecNotApplied, r.stateOf(op).Executions[0].State)
	require.Zero(t, s.Ledger().ExportRequests)
	require.Equal(t, 1, r.stateOf(op).Capabilities[capID].UsesLeft())
}

func (r *rig) stateOf(op domain.OperationID) *domain.Operation {
	r.t.Helper()
	s, err := r.h.Load(r.t.Context(), op)
	require.NoError(r.t, err)
	return s
}
