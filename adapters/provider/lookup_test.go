package provider_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

func TestLookupFindsRefundsByOperation(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	c := e.client()
	created := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Completed, created.Outcome)
	c.CreateRefund(t.Context(), refundRequest("OP-2"))

	refunds, err := c.LookupByReference(t.Context(), "OP-1")
	require.NoError(t, err)
	require.Equal(t, []domain.ProviderEffect{{
		Reference: created.ProviderReference, OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", State: domain.EffectApplied,
		AmountMinor: 12000, Currency: "eur", CreatedAt: t0, Detail: `status "succeeded"`,
	}}, refunds)

	none, err := c.LookupByReference(t.Context(), "OP-3")
	require.NoError(t, err)
	require.NotNil(t, none)
	require.Empty(t, none)

	e.requireLedger(2, 2, 2)
	require.Equal(t, 1, e.sim.Ledger().ByOperation["OP-1"].Lookups)
	require.Equal(t, 1, e.sim.Ledger().ByOperation["OP-3"].Lookups)

	var found, notFound []bool
	for _, s := range e.sends.all() {
		if s.Kind == provider.SendLookup {
			found, notFound = append(found, s.Outcome == domain.Completed), append(notFound, s.NotFound)
		}
	}
	require.Equal(t, []bool{true, true}, found, "both lookups were answered")
	require.Equal(t, []bool{false, true}, notFound, "the observer is told the second found nothing")
}

func TestLookupFailuresAreErrors(t *testing.T) {
	t.Run("dead port", func(t *testing.T) {
		c, err := provider.New(provider.Config{BaseURL: "http://" + deadAddr(t), After: immediately})
		require.NoError(t, err)
		refunds, err := c.LookupByReference(t.Context(), "OP-1")
		require.Error(t, err)
		require.Nil(t, refunds)
	})
	t.Run("empty operation", func(t *testing.T) {
		e := newEnv(t, sim.ProfileStripeV1)
		_, err := e.client().LookupByReference(t.Context(), "")
		require.Error(t, err)
		e.requireLedger(0, 0, 0)
	})

	bodies := map[string]string{
		"not JSON":        `<html>`,
		"not a list":      `{"object":"refund","id":"re_1"}`,
		"no data":         `{"object":"list"}`,
		"paginated":       `{"object":"list","data":[],"has_more":true}`,
		"other operation": `{"object":"list","data":[{"id":"re_1","object":"refund","amount":5,"currency":"eur","status":"succeeded","created":1,"metadata":{"operation_id":"OP-2"}}]}`,
		"no amount":       `{"object":"list","data":[{"id":"re_1","object":"refund","currency":"eur","status":"succeeded","created":1,"metadata":{"operation_id":"OP-1"}}]}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int32
			c := fixedServer(t, &requests, http.StatusOK, body)
			refunds, err := c.LookupByReference(t.Context(), "OP-1")
			require.Error(t, err)
			require.Nil(t, refunds)
			require.EqualValues(t, 1, requests.Load(), "a malformed answer is not asked again")
		})
	}

	t.Run("5xx is retried, then an error", func(t *testing.T) {
		var requests atomic.Int32
		c := fixedServer(t, &requests, http.StatusServiceUnavailable, `{"error":{"type":"api_error","message":"down"}}`)
		_, err := c.LookupByReference(t.Context(), "OP-1")
		require.ErrorContains(t, err, "HTTP 503")
		require.EqualValues(t, provider.DefaultMaxAttempts, requests.Load())
	})
}

// Stripe's statuses map onto the model's states; a status the adapter does
// not document is EffectUnknown, which reconciliation never resolves on.
func TestLookupMapsStripeStatuses(t *testing.T) {
	var requests atomic.Int32
	c := fixedServer(t, &requests, http.StatusOK, `{"object":"list","has_more":false,"data":[
		{"id":"re_2","object":"refund","amount":5,"currency":"eur","status":"canceled","created":1700000000,"metadata":{"operation_id":"OP-1"}},
		{"id":"re_1","object":"refund","amount":5,"currency":"eur","status":"requires_action","created":1700000000,"metadata":{"operation_id":"OP-1","idempotency_key":"refund-OP-1-a1"}},
		{"id":"re_3","object":"refund","amount":5,"currency":"eur","status":"failed","failure_reason":"expired_or_canceled_card","created":1700000000,"metadata":{"operation_id":"OP-1"}},
		{"id":"re_4","object":"refund","amount":5,"currency":"eur","status":"weird","created":1700000000,"metadata":{"operation_id":"OP-1"}},
		{"id":"re_5","object":"refund","amount":5,"currency":"eur","status":"succeeded","created":1700000000,"metadata":{"operation_id":"OP-1"}},
		{"id":"re_6","object":"refund","amount":5,"currency":"eur","status":"pending","created":1700000000,"metadata":{"operation_id":"OP-1"}}]}`)
	refunds, err := c.LookupByReference(t.Context(), "OP-1")
	require.NoError(t, err)
	at := time.Unix(1700000000, 0).UTC()
	require.Equal(t, []domain.ProviderEffect{
		{Reference: "re_2", OperationID: "OP-1", State: domain.EffectNotApplied, Detail: `status "canceled"`, AmountMinor: 5, Currency: "eur", CreatedAt: at},
		{Reference: "re_1", OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", State: domain.EffectInProgress, Detail: `status "requires_action"`,
			AmountMinor: 5, Currency: "eur", CreatedAt: at},
		{Reference: "re_3", OperationID: "OP-1", State: domain.EffectNotApplied, Detail: `status "failed": expired_or_canceled_card`, AmountMinor: 5, Currency: "eur", CreatedAt: at},
		{Reference: "re_4", OperationID: "OP-1", State: domain.EffectUnknown, Detail: `status "weird"`, AmountMinor: 5, Currency: "eur", CreatedAt: at},
		{Reference: "re_5", OperationID: "OP-1", State: domain.EffectApplied, Detail: `status "succeeded"`, AmountMinor: 5, Currency: "eur", CreatedAt: at},
		{Reference: "re_6", OperationID: "OP-1", State: domain.EffectInProgress, Detail: `status "pending"`, AmountMinor: 5, Currency: "eur", CreatedAt: at},
	}, refunds)
	require.EqualValues(t, 1, requests.Load())
}

// fixedServer answers every request with status and body, counting them.
func fixedServer(t *testing.T, requests *atomic.Int32, status int, body string) *provider.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := provider.New(provider.Config{BaseURL: srv.URL, After: immediately})
	require.NoError(t, err)
	return c
}
