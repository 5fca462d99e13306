package provider_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

func TestCreateRefundCompletes(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	req := refundRequest("OP-4471")
	res := e.client().CreateRefund(t.Context(), req)

	require.Equal(t, domain.Completed, res.Outcome, res.Detail)
	e.requireLedger(1, 1, 0)
	ledger := e.sim.Ledger()
	require.Equal(t, ledger.Requests[0].RefundID, res.ProviderReference)
	require.Equal(t, sim.Counters{RequestsReceived: 1, RefundsCreated: 1}, ledger.ByOperation["OP-4471"])

	var export bytes.Buffer
	require.NoError(t, e.sim.WriteLedgerExport(&export))
	var line sim.ExportedRefund
	require.NoError(t, json.Unmarshal(export.Bytes(), &line))
	require.Equal(t, sim.ExportedRefund{
		ID: res.ProviderReference, OperationID: "OP-4471", IdempotencyKey: "refund-OP-4471-a1",
		Amount: 12000, Currency: "eur", Order: "ORD-8841", Status: "succeeded", Created: t0.Unix(),
	}, line)

	sends := e.sends.all()
	require.Len(t, sends, 1)
	require.Equal(t, provider.Send{
		Kind: provider.SendCreate, OperationID: "OP-4471", IdempotencyKey: "refund-OP-4471-a1", Attempt: 1,
		Outcome: domain.Completed, StatusCode: http.StatusOK, Detail: sends[0].Detail, Latency: sends[0].Latency,
	}, sends[0])
	require.GreaterOrEqual(t, sends[0].Latency, time.Duration(0))
}

// Each fault, one send only: what the client concludes, and what the
// provider's ledger says actually happened.
func TestEachFaultIsClassified(t *testing.T) {
	cases := []struct {
		fault   sim.FaultKind
		outcome domain.Outcome
		created int
	}{
		{sim.FaultLoseResponseAfterCommit, domain.Unknown, 1},
		{sim.Fault5xxBeforeCommit, domain.Unknown, 0},
		{sim.Fault5xxAfterCommit, domain.Unknown, 1},
		{sim.FaultRejectValidation, domain.NotApplied, 0},
		{sim.FaultDropConnectionBeforeRead, domain.Unknown, 0},
	}
	for _, c := range cases {
		t.Run(string(c.fault), func(t *testing.T) {
			e := newEnv(t, sim.ProfileStripeV1)
			e.arm(sim.Fault{Kind: c.fault, OperationID: "OP-1"})
			res := e.client(maxAttempts(1)).CreateRefund(t.Context(), refundRequest("OP-1"))
			require.Equal(t, c.outcome, res.Outcome, res.Detail)
			e.requireLedger(1, c.created, 0)
			require.Equal(t, []sim.FaultKind{c.fault}, e.sim.Ledger().Requests[0].Faults)
			require.Len(t, e.sends.all(), 1)
		})
	}
}

func TestValidationRejectionIsNotRetried(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultRejectValidation})
	res := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.NotApplied, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "invalid_request_error")
	e.requireLedger(1, 0, 0)
}

func TestCancelWhileHeldIsUnknownAndNothingIsResent(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan domain.RefundResult, 1)
	go func() { done <- e.client().CreateRefund(ctx, refundRequest("OP-1")) }()
	<-e.sim.Held()
	cancel() // the lease is lost mid-request

	res := <-done
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "cancelled mid-request")
	e.requireLedger(1, 1, 0)
	require.Len(t, e.sends.all(), 1)
}

func TestConcurrentSendWhileHeldIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	done := make(chan domain.RefundResult, 1)
	go func() { done <- e.client().CreateRefund(t.Context(), refundRequest("OP-1")) }()
	<-e.sim.Held()

	second := e.client(maxAttempts(1)).CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, second.Outcome)
	require.Contains(t, second.Detail, "HTTP 409")

	e.sim.Release()
	require.Equal(t, domain.Completed, (<-done).Outcome)
	e.requireLedger(2, 1, 0)
	e.requireOneKey("refund-OP-1-a1")
}

// A 409 is resent after back-off; by then the first request has finished and
// the resend gets its saved result.
func TestConflictIsResentAfterBackoff(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	first := make(chan domain.RefundResult, 1)
	go func() { first <- e.client().CreateRefund(t.Context(), refundRequest("OP-1")) }()
	<-e.sim.Held()

	backingOff := make(chan struct{})
	fire := make(chan time.Time)
	second := make(chan domain.RefundResult, 1)
	retrying := e.client(func(c *provider.Config) {
		c.After = func(time.Duration) <-chan time.Time { close(backingOff); return fire }
	})
	go func() { second <- retrying.CreateRefund(t.Context(), refundRequest("OP-1")) }()
	<-backingOff // the 409 arrived; the client waits
	e.sim.Release()
	require.Equal(t, domain.Completed, (<-first).Outcome)
	fire <- time.Time{}

	res := <-second
	require.Equal(t, domain.Completed, res.Outcome, res.Detail)
	require.Equal(t, e.sim.Ledger().Requests[0].RefundID, res.ProviderReference)
	e.requireLedger(3, 1, 0)
	e.requireOneKey("refund-OP-1-a1")
	require.Equal(t, []sim.RequestResult{sim.ResultCreated, sim.ResultConflict, sim.ResultReplayed}, results(e.sim.Ledger()))
}

func TestCancelDuringBackoffStartsNoFurtherSend(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.Fault5xxBeforeCommit})
	backingOff := make(chan time.Duration, 1)
	c := e.client(func(c *provider.Config) {
		c.After = func(d time.Duration) <-chan time.Time {
			backingOff <- d
			return nil // never fires: only ctx can end this wait
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan domain.RefundResult, 1)
	go func() { done <- c.CreateRefund(ctx, refundRequest("OP-1")) }()
	<-backingOff
	cancel()

	res := <-done
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "no further send")
	e.requireLedger(1, 0, 0)
	require.Len(t, e.sends.all(), 1)
}

func TestCancelledContextSendsNothing(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := e.client().CreateRefund(ctx, refundRequest("OP-1"))
	require.Equal(t, domain.NotApplied, res.Outcome)
	e.requireLedger(0, 0, 0)
	require.Empty(t, e.sends.all())
}

func TestInvalidRequestIsNotSent(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	for name, edit := range map[string]func(*domain.RefundRequest){
		"no key":       func(r *domain.RefundRequest) { r.IdempotencyKey = "" },
		"no operation": func(r *domain.RefundRequest) { r.OperationID = "" },
		"no order":     func(r *domain.RefundRequest) { r.OrderID = "" },
		"zero amount":  func(r *domain.RefundRequest) { r.AmountMinor = 0 },
		"bad currency": func(r *domain.RefundRequest) { r.Currency = "EURO" },
		"key too long": func(r *domain.RefundRequest) {
			r.IdempotencyKey = domain.IdempotencyKey(bytes.Repeat([]byte("k"), 256))
		},
	} {
		req := refundRequest("OP-1")
		edit(&req)
		res := e.client().CreateRefund(t.Context(), req)
		require.Equal(t, domain.NotApplied, res.Outcome, name)
		require.Contains(t, res.Detail, "not sent", name)
	}
	e.requireLedger(0, 0, 0)
}

func TestSameKeyOtherParametersIsUnknownAndNotRetried(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	require.Equal(t, domain.Completed, e.client().CreateRefund(t.Context(), refundRequest("OP-1")).Outcome)
	changed := refundRequest("OP-1")
	changed.AmountMinor = 5000
	res := e.client().CreateRefund(t.Context(), changed)
	require.Equal(t, domain.Unknown, res.Outcome)
	require.Contains(t, res.Detail, "idempotency_error")
	e.requireLedger(2, 1, 0)
	require.Len(t, e.sends.all(), 2, "the mismatch is not resent")
}

func results(l sim.Ledger) []sim.RequestResult {
	var out []sim.RequestResult
	for _, r := range l.Requests {
		out = append(out, r.Result)
	}
	return out
}
