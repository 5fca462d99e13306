package sim_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

func TestLoseResponseAfterCommit(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	h.arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit})
	lost := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Error(t, lost.err, "no response")
	h.requireCounts(1, 1, 0)
	entry := h.sim.Ledger().Requests[0]
	require.Equal(t, sim.ResultLost, entry.Result)
	require.Equal(t, []sim.FaultKind{sim.FaultLoseResponseAfterCommit}, entry.Faults)
	require.Zero(t, entry.Status)

	// The 200 was saved: a resend gets it replayed and creates nothing.
	again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, again.status)
	require.True(t, again.replayed())
	require.Equal(t, entry.RefundID, again.refund(t)["id"])
	h.requireCounts(2, 1, 0)
}

func TestDropConnectionBeforeRead(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	h.arm(sim.Fault{Kind: sim.FaultDropConnectionBeforeRead})
	dropped := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Error(t, dropped.err)
	h.requireCounts(1, 0, 0)
	require.Equal(t, sim.ResultDropped, h.sim.Ledger().Requests[0].Result)
	require.Equal(t, 1, h.sim.Ledger().ByOperation["OP-1"].RequestsReceived)

	// Nothing was saved: a resend executes.
	again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, again.status)
	require.False(t, again.replayed())
	h.requireCounts(2, 1, 0)
}

func TestHoldResponseEndsWhenTheClientLeaves(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	h.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan response, 1)
	go func() { done <- h.postForm(ctx, "k1", refundForm("OP-1", 100)) }()
	<-h.sim.Held()
	cancel()
	require.ErrorIs(t, (<-done).err, context.Canceled)
	h.requireCounts(1, 1, 0)
	// The handler notices the client left, saves the 200 and ends the hold.
	require.Eventually(t, func() bool { return h.sim.HeldCount() == 0 }, 5*time.Second, time.Millisecond)
	again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, again.status)
	require.True(t, again.replayed())
	h.requireCounts(2, 1, 0)
}

func TestDelayFault(t *testing.T) {
	t.Run("elapses, then the request runs", func(t *testing.T) {
		h := newHarness(t, sim.ProfileStripeV1)
		h.arm(sim.Fault{Kind: sim.FaultDelay, Duration: time.Millisecond})
		r := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.Equal(t, http.StatusOK, r.status)
		require.Equal(t, []sim.FaultKind{sim.FaultDelay}, h.sim.Ledger().Requests[0].Faults)
		h.requireCounts(1, 1, 0)
	})
	t.Run("client cancellation abandons the request", func(t *testing.T) {
		h := newHarness(t, sim.ProfileStripeV1)
		h.arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan response, 1)
		go func() { done <- h.postForm(ctx, "k1", refundForm("OP-1", 100)) }()
		require.Eventually(t, func() bool { return h.sim.Ledger().RequestsReceived == 1 }, 5*time.Second, time.Millisecond)
		cancel()
		require.ErrorIs(t, (<-done).err, context.Canceled)
		require.Eventually(t, func() bool { return h.sim.Ledger().Requests[0].Result == sim.ResultAbandoned },
			5*time.Second, time.Millisecond)
		h.requireCounts(1, 0, 0)
		// Nothing was saved under the key.
		again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.False(t, again.replayed())
		h.requireCounts(2, 1, 0)
	})
	t.Run("close answers 503 without executing", func(t *testing.T) {
		h := newHarness(t, sim.ProfileStripeV1)
		h.arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay})
		done := make(chan response, 1)
		go func() { done <- h.postForm(t.Context(), "k1", refundForm("OP-1", 100)) }()
		require.Eventually(t, func() bool { return h.sim.Ledger().RequestsReceived == 1 }, 5*time.Second, time.Millisecond)
		h.sim.Close()
		r := <-done
		require.Equal(t, http.StatusServiceUnavailable, r.status)
		h.requireCounts(1, 0, 0)
	})
}

func TestFaultMatchesOnlyItsOperation(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	h.arm(sim.Fault{Kind: sim.Fault5xxBeforeCommit, OperationID: "OP-2"})
	require.Equal(t, http.StatusOK, h.postForm(t.Context(), "k1", refundForm("OP-1", 100)).status)
	require.Len(t, h.sim.ArmedFaults(), 1)
	require.Equal(t, http.StatusInternalServerError, h.postForm(t.Context(), "k2", refundForm("OP-2", 100)).status)
	require.Empty(t, h.sim.ArmedFaults())
	h.requireCounts(2, 1, 0)
}

func TestExecutionFaultIsNotConsumedByAReplay(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	require.Equal(t, http.StatusOK, h.postForm(t.Context(), "k1", refundForm("OP-1", 100)).status)
	h.arm(sim.Fault{Kind: sim.Fault5xxBeforeCommit})
	replay := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, replay.status)
	require.True(t, replay.replayed())
	require.Len(t, h.sim.ArmedFaults(), 1)
	require.Equal(t, http.StatusInternalServerError, h.postForm(t.Context(), "k2", refundForm("OP-1", 100)).status)
}

func TestArmRejectsInvalidFaults(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1, func(c *sim.Config) { c.MaxArmedFaults = 1 })
	require.Error(t, h.sim.Arm(sim.Fault{Kind: "explode"}))
	require.Error(t, h.sim.Arm(sim.Fault{Kind: sim.FaultDelay}))
	require.Error(t, h.sim.Arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay + 1}))
	require.Error(t, h.sim.Arm(sim.Fault{Kind: sim.FaultHoldResponse, Duration: time.Second}))
	require.NoError(t, h.sim.Arm(sim.Fault{Kind: sim.FaultHoldResponse}))
	require.Error(t, h.sim.Arm(sim.Fault{Kind: sim.FaultHoldResponse}), "bounded")
}
