package sim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

func TestV1RepeatedKeyReplaysStatusAndBody(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	first := h.postForm(t.Context(), "refund-OP-1-a1", refundForm("OP-1", 12000))
	require.NoError(t, first.err)
	require.Equal(t, http.StatusOK, first.status)
	require.False(t, first.replayed())
	ref := first.refund(t)
	require.Equal(t, "refund", ref["object"])
	require.Equal(t, "succeeded", ref["status"])
	require.EqualValues(t, 12000, ref["amount"])
	require.Equal(t, map[string]any{"operation_id": "OP-1"}, ref["metadata"])

	second := h.postForm(t.Context(), "refund-OP-1-a1", refundForm("OP-1", 12000))
	require.NoError(t, second.err)
	require.Equal(t, first.status, second.status)
	require.Equal(t, first.body, second.body, "byte-identical replay")
	require.True(t, second.replayed())

	h.requireCounts(2, 1, 0)
	require.Equal(t, sim.Counters{RequestsReceived: 2, RefundsCreated: 1}, h.sim.Ledger().ByOperation["OP-1"])
	reqs := h.sim.Ledger().Requests
	require.Len(t, reqs, 2)
	require.Equal(t, sim.ResultCreated, reqs[0].Result)
	require.Equal(t, sim.ResultReplayed, reqs[1].Result)
}

func TestSameKeyDifferentParametersIsAnIdempotencyError(t *testing.T) {
	for _, profile := range []sim.Profile{sim.ProfileStripeV1, sim.ProfileStripeV2} {
		t.Run(string(profile), func(t *testing.T) {
			h := newHarness(t, profile)
			require.Equal(t, http.StatusOK, h.postForm(t.Context(), "k1", refundForm("OP-1", 100)).status)
			r := h.postForm(t.Context(), "k1", refundForm("OP-1", 200))
			require.Equal(t, http.StatusBadRequest, r.status)
			require.Equal(t, "idempotency_error", r.errorType())
			require.False(t, r.replayed())
			h.requireCounts(2, 1, 0)
			require.Equal(t, sim.ResultMismatch, h.sim.Ledger().Requests[1].Result)
		})
	}
}

func TestSameKeyWhileHeldIsAConflict(t *testing.T) {
	for _, profile := range []sim.Profile{sim.ProfileStripeV1, sim.ProfileStripeV2} {
		t.Run(string(profile), func(t *testing.T) {
			h := newHarness(t, profile)
			h.arm(sim.Fault{Kind: sim.FaultHoldResponse})
			held := make(chan response, 1)
			go func() { held <- h.postForm(t.Context(), "k1", refundForm("OP-1", 100)) }()
			<-h.sim.Held()

			conflict := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, http.StatusConflict, conflict.status)
			require.Equal(t, "idempotency_error", conflict.errorType())
			h.requireCounts(2, 1, 0) // the held request already committed

			require.Equal(t, 1, h.sim.Release())
			first := <-held
			require.NoError(t, first.err)
			require.Equal(t, http.StatusOK, first.status)
			h.requireCounts(2, 1, 0)

			// The key is no longer in progress: a repeat is answered from it.
			again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, http.StatusOK, again.status)
			require.True(t, again.replayed())
			require.Equal(t, first.refund(t)["id"], again.refund(t)["id"])
			h.requireCounts(3, 1, 0)
		})
	}
}

func TestV1KeyIsPrunedAfter24Hours(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, first.status)

	h.advance(23 * time.Hour)
	replay := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.True(t, replay.replayed())
	h.requireCounts(2, 1, 0)

	h.advance(2 * time.Hour) // 25 h after the first request
	fresh := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, fresh.status)
	require.False(t, fresh.replayed())
	require.NotEqual(t, first.refund(t)["id"], fresh.refund(t)["id"])
	h.requireCounts(3, 2, 0)
	require.Equal(t, 2, h.sim.Ledger().ByOperation["OP-1"].RefundsCreated)
}

func TestV2RemembersKeysFor30Days(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV2)
	first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, first.status)

	h.advance(29 * 24 * time.Hour)
	replay := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, replay.status)
	require.True(t, replay.replayed())
	require.Equal(t, first.body, replay.body)
	h.requireCounts(2, 1, 0)

	h.advance(24*time.Hour + time.Minute) // past 30 days
	fresh := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.False(t, fresh.replayed())
	h.requireCounts(3, 2, 0)
}

// A failure saved once execution began is replayed by v1 and executed again
// by v2; nothing was committed by the first request in either case.
func TestSavedFailureIsReplayedByV1AndReexecutedByV2(t *testing.T) {
	cases := []struct {
		fault     sim.FaultKind
		status    int
		errorType string
	}{
		{sim.Fault5xxBeforeCommit, http.StatusInternalServerError, "api_error"},
		{sim.FaultRejectValidation, http.StatusBadRequest, "invalid_request_error"},
	}
	for _, c := range cases {
		t.Run(string(c.fault)+"/stripe-v1", func(t *testing.T) {
			h := newHarness(t, sim.ProfileStripeV1)
			h.arm(sim.Fault{Kind: c.fault})
			first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, c.status, first.status)
			require.Equal(t, c.errorType, first.errorType())
			h.requireCounts(1, 0, 0)

			replay := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, c.status, replay.status)
			require.Equal(t, first.body, replay.body)
			require.True(t, replay.replayed())
			h.requireCounts(2, 0, 0)
		})
		t.Run(string(c.fault)+"/stripe-v2", func(t *testing.T) {
			h := newHarness(t, sim.ProfileStripeV2)
			h.arm(sim.Fault{Kind: c.fault})
			first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, c.status, first.status)
			h.requireCounts(1, 0, 0)

			again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, http.StatusOK, again.status)
			require.False(t, again.replayed(), "executed again, not replayed")
			h.requireCounts(2, 1, 0)

			// Now the key holds a success: replayed from here on.
			third := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.True(t, third.replayed())
			require.Equal(t, again.body, third.body)
			h.requireCounts(3, 1, 0)
		})
	}
}

// A 500 after commit: v1 replays the saved 500 although the refund exists;
// v2 answers the committed refund. Neither creates a second refund.
func Test5xxAfterCommit(t *testing.T) {
	t.Run("stripe-v1", func(t *testing.T) {
		h := newHarness(t, sim.ProfileStripeV1)
		h.arm(sim.Fault{Kind: sim.Fault5xxAfterCommit})
		first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.Equal(t, http.StatusInternalServerError, first.status)
		h.requireCounts(1, 1, 0)
		replay := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.Equal(t, http.StatusInternalServerError, replay.status)
		require.Equal(t, first.body, replay.body)
		require.True(t, replay.replayed())
		h.requireCounts(2, 1, 0)
	})
	t.Run("stripe-v2", func(t *testing.T) {
		h := newHarness(t, sim.ProfileStripeV2)
		h.arm(sim.Fault{Kind: sim.Fault5xxAfterCommit})
		first := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.Equal(t, http.StatusInternalServerError, first.status)
		h.requireCounts(1, 1, 0)
		again := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
		require.Equal(t, http.StatusOK, again.status)
		require.True(t, again.replayed())
		require.Equal(t, h.sim.Ledger().Requests[0].RefundID, again.refund(t)["id"])
		h.requireCounts(2, 1, 0)
	})
}

func TestParameterValidationErrorsAreNotSaved(t *testing.T) {
	for _, profile := range []sim.Profile{sim.ProfileStripeV1, sim.ProfileStripeV2} {
		t.Run(string(profile), func(t *testing.T) {
			h := newHarness(t, profile)
			bad := refundForm("OP-1", 100)
			bad.Set("amount", "-5")
			r := h.postForm(t.Context(), "k1", bad)
			require.Equal(t, http.StatusBadRequest, r.status)
			require.Equal(t, "invalid_request_error", r.errorType())
			h.requireCounts(1, 0, 0)

			good := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, http.StatusOK, good.status)
			require.False(t, good.replayed(), "the rejected request saved nothing under the key")
			h.requireCounts(2, 1, 0)
		})
	}
}

func TestKeyStoreIsBoundedByCountAndTime(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1, func(c *sim.Config) { c.MaxRememberedKeys = 1 })
	require.Equal(t, http.StatusOK, h.postForm(t.Context(), "k1", refundForm("OP-1", 100)).status)
	full := h.postForm(t.Context(), "k2", refundForm("OP-2", 100))
	require.Equal(t, http.StatusTooManyRequests, full.status)
	require.Equal(t, "rate_limit_error", full.errorType())
	h.requireCounts(2, 1, 0)

	h.advance(25 * time.Hour) // k1 pruned by the next request
	require.Equal(t, http.StatusOK, h.postForm(t.Context(), "k2", refundForm("OP-2", 100)).status)
	h.requireCounts(3, 2, 0)
}
