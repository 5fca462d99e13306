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

	refunds, err := c.LookupRefunds(t.Context(), "OP-1")
	require.NoError(t, err)
	require.Equal(t, []domain.ProviderRefund{{
		ID: created.ProviderReference, OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", Status: "succeeded",
		AmountMinor: 12000, Currency: "eur", CreatedAt: t0,
	}}, refunds)

	none, err := c.LookupRefunds(t.Context(), "OP-3")
	require.NoError(t, err)
	require.NotNil(t, none)
	require.Empty(t, none)

	e.requireLedger(2, 2, 2)
	require.Equal(t, 1, e.sim.Ledger().ByOperation["OP-1"].Lookups)
	require.Equal(t, 1, e.sim.Ledger().ByOperation["OP-3"].Lookups)
}

func TestLookupFailuresAreErrors(t *testing.T) {
	t.Run("dead port", func(t *testing.T) {
		c, err := provider.New(provider.Config{BaseURL: "http://" + deadAddr(t), After: immediately})
		require.NoError(t, err)
		refunds, err := c.LookupRefunds(t.Context(), "OP-1")
		require.Error(t, err)
		require.Nil(t, refunds)
	})
	t.Run("empty operation", func(t *testing.T) {
		e := newEnv(t, sim.ProfileStripeV1)
		_, err := e.client().LookupRefunds(t.Context(), "")
		require.Error(t, err)
		e.requireLedger(0, 0, 0)
	})

	bodies := map[string]string{
		"not JSON":        `<html>`,
		"not a list":      `{"object":"refund","id":"re_1"}`,
		"no data":         `{"object":"list"}`,
		"paginated":       `{"object":"list","data":[],"has_more":true}`,
		"other operation": `{"object":"list","data":[{"id":"re_1","object":"refund","amount":5,"currency":"eur","status":"succeeded","created":1,"metadata":{"operation_id":"OP-2"}}]}`,
		"unknown status":  `{"object":"list","data":[{"id":"re_1","object":"refund","amount":5,"currency":"eur","status":"weird","created":1,"metadata":{"operation_id":"OP-1"}}]}`,
		"no amount":       `{"object":"list","data":[{"id":"re_1","object":"refund","currency":"eur","status":"succeeded","created":1,"metadata":{"operation_id":"OP-1"}}]}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int32
			c := fixedServer(t, &requests, http.StatusOK, body)
			refunds, err := c.LookupRefunds(t.Context(), "OP-1")
			require.Error(t, err)
			require.Nil(t, refunds)
			require.EqualValues(t, 1, requests.Load(), "a malformed answer is not asked again")
		})
	}

	t.Run("5xx is retried, then an error", func(t *testing.T) {
		var requests atomic.Int32
		c := fixedServer(t, &requests, http.StatusServiceUnavailable, `{"error":{"type":"api_error","message":"down"}}`)
		_, err := c.LookupRefunds(t.Context(), "OP-1")
		require.ErrorContains(t, err, "HTTP 503")
		require.EqualValues(t, provider.DefaultMaxAttempts, requests.Load())
	})
}

func TestLookupMapsStripeStatuses(t *testing.T) {
	var requests atomic.Int32
	c := fixedServer(t, &requests, http.StatusOK, `{"object":"list","has_more":false,"data":[
		{"id":"re_2","object":"refund","amount":5,"currency":"eur","status":"canceled","created":1700000000,"metadata":{"operation_id":"OP-1"}},
		{"id":"re_1","object":"refund","amount":5,"currency":"eur","status":"requires_action","created":1700000000,"metadata":{"operation_id":"OP-1","idempotency_key":"refund-OP-1-a1"}}]}`)
	refunds, err := c.LookupRefunds(t.Context(), "OP-1")
	require.NoError(t, err)
	require.Equal(t, []domain.ProviderRefund{
		{ID: "re_2", OperationID: "OP-1", Status: "failed", FailureReason: "canceled", AmountMinor: 5, Currency: "eur",
			CreatedAt: time.Unix(1700000000, 0).UTC()},
		{ID: "re_1", OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", Status: "pending", AmountMinor: 5, Currency: "eur",
			CreatedAt: time.Unix(1700000000, 0).UTC()},
	}, refunds)
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
