package client_test

import (
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/client"
	"opledger/domain"
)

// TestStripeRefundsIsTheWorkersCall: the client's StripeRefunds and the
// provider adapter `opledger worker` uses (adapters/provider) conclude the
// same outcome under every fault the simulator injects, and leave the same
// on its ledger: one executor, written twice, held equal here.
func TestStripeRefundsIsTheWorkersCall(t *testing.T) {
	t.Parallel()
	faults := []sim.FaultKind{"", sim.FaultLoseResponseAfterCommit, sim.Fault5xxBeforeCommit, sim.Fault5xxAfterCommit,
		sim.FaultRejectValidation, sim.FaultDropConnectionBeforeRead, sim.FaultDecline}
	for _, fault := range faults {
		t.Run(string(fault)+"_", func(t *testing.T) {
			t.Parallel()
			outcomes := map[string]domain.Outcome{}
			ledgers := map[string]sim.Counters{}
			for _, who := range []string{"adapter", "client"} {
				s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV1})
				require.NoError(t, err)
				t.Cleanup(s.Close)
				srv := httptest.NewServer(s)
				t.Cleanup(srv.Close)
				op := domain.OperationID("OP-conf-" + who)
				if fault != "" {
					require.NoError(t, s.Arm(sim.Fault{Kind: fault, OperationID: string(op)}))
				}
				key := domain.IdempotencyKeyFor(op, 1)
				switch who {
				case "adapter":
					p, err := provider.New(provider.Config{BaseURL: srv.URL, MaxAttempts: 3, BackoffMin: time.Millisecond, BackoffMax: time.Millisecond})
					require.NoError(t, err)
					r := p.CreateRefund(t.Context(), domain.RefundRequest{OperationID: op, OrderID: "ORD-1", AmountMinor: 4250, Currency: "EUR", IdempotencyKey: key})
					outcomes[who] = r.Outcome
				case "client":
					x := &client.Execution{ExecutionID: "EXE-1.1", OperationID: string(op), Kind: client.KindRefund, LeaseEpoch: 1,
						IdempotencyKey: string(key), AmountMinor: 4250, Currency: "EUR", OrderID: "ORD-1"}
					r := client.StripeRefunds{BaseURL: srv.URL, Sends: client.Sends{MaxSends: 3, Backoff: time.Millisecond}}.Execute(t.Context(), x)
					outcomes[who] = domain.Outcome(r.Outcome)
				}
				ledgers[who] = s.Ledger().ByOperation[string(op)]
			}
			require.Equal(t, outcomes["adapter"], outcomes["client"], "fault %q", fault)
			require.Equal(t, fmt.Sprint(ledgers["adapter"]), fmt.Sprint(ledgers["client"]), "the provider's ledger")
		})
	}
}
