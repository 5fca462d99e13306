package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// lateClaim is the ledger of a worker that gets its claim's answer late (a
// store that took long to append, a pause between answer and call): the
// clock moves by delay after the claim.
type lateClaim struct {
	*ledger.Handler
	r     *rig
	delay time.Duration
}

func (l lateClaim) Claim(ctx context.Context, op domain.OperationID, cmd domain.Claim) (ledger.ClaimOutcome, error) {
	out, err := l.Handler.Claim(ctx, op, cmd)
	l.r.clk.Advance(l.delay)
	return out, err
}

// A lease that expired before the call sends nothing: after its expiry the
// sweeper may make the execution Unknown and the reconciler resend under the
// same key, so the worker's request would race it. Nothing was sent, so
// NotApplied is the truth, and recorded while the execution is Executing.
func TestLeaseExpiredBeforeTheCallSendsNothing(t *testing.T) {
	r := newRig(t)
	s, client := r.simulator()
	w := workerWith(r, lateClaim{Handler: r.h, r: r, delay: lease}, client)
	h := r.wait(handle(t.Context(), w, r.delivery("MSG-1")))
	require.NoError(t, h.err)
	require.False(t, h.res.Executed)
	require.Equal(t, domain.NotApplied, h.res.Outcome)
	require.Equal(t, "outcome", h.res.Recorded)
	require.Zero(t, s.Ledger().RequestsReceived, "nothing reached the provider")
	require.Equal(t, domain.ExecNotApplied, r.state().Executions[0].State)
}

// A lease with less left than the provider timeout bounds the call by what
// is left.
func TestCallEndsBeforeTheLease(t *testing.T) {
	r := newRig(t)
	var left time.Duration
	p := newFakeProvider(func(ctx context.Context) domain.RefundResult {
		dl, ok := ctx.Deadline()
		require.True(t, ok)
		left = time.Until(dl)
		return domain.RefundResult{Outcome: domain.Completed, ProviderReference: "re_1"}
	})
	w := workerWith(r, lateClaim{Handler: r.h, r: r, delay: lease - 10*time.Second}, p)
	h := r.wait(handle(t.Context(), w, r.delivery("MSG-1")))
	require.NoError(t, h.err)
	require.True(t, h.res.Executed)
	require.LessOrEqual(t, left, 10*time.Second, "the call may not outlast the lease")
	require.Greater(t, left, 5*time.Second)
	require.Equal(t, domain.ExecCompleted, r.state().Executions[0].State)
}

func workerWith(r *rig, l worker.Ledger, p domain.Provider) *worker.Worker {
	r.t.Helper()
	w, err := worker.New(worker.Config{
		ID: "worker-a", Ledger: l, Provider: p, Clock: r.clk, Logger: quiet(r.t),
		LeaseDuration: lease, ProviderTimeout: 30 * time.Second, After: r.after,
	})
	require.NoError(r.t, err)
	return w
}
