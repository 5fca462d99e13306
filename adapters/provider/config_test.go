package provider_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
)

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]provider.Config{
		"no base URL":        {},
		"relative base URL":  {BaseURL: "/v1"},
		"bad scheme":         {BaseURL: "ftp://example.com"},
		"credentials in URL": {BaseURL: "https://user:secret@example.com"},
		"negative timeout":   {BaseURL: "http://127.0.0.1:1", Timeout: -time.Second},
		"too many attempts":  {BaseURL: "http://127.0.0.1:1", MaxAttempts: provider.MaxAttemptsLimit + 1},
		"negative attempts":  {BaseURL: "http://127.0.0.1:1", MaxAttempts: -1},
		"back-off max < min": {BaseURL: "http://127.0.0.1:1", BackoffMin: time.Second, BackoffMax: time.Millisecond},
		"negative back-off":  {BaseURL: "http://127.0.0.1:1", BackoffMin: -time.Second},
	} {
		_, err := provider.New(cfg)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "secret", name)
	}
	_, err := provider.New(provider.Config{BaseURL: "http://127.0.0.1:1"})
	require.NoError(t, err)
	_, err = provider.New(provider.Config{BaseURL: "http://127.0.0.1:1", BackoffMin: time.Minute})
	require.NoError(t, err, "BackoffMax defaults to at least BackoffMin")
}

func TestClientSendsTheAPIKeyAndLeavesTheCallersClientAlone(t *testing.T) {
	var auth, key, contentType string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, key, contentType = r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type")
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	mine := &http.Client{Timeout: time.Hour}
	c, err := provider.New(provider.Config{BaseURL: srv.URL, APIKey: "sk_test_1", HTTPClient: mine, MaxAttempts: 1})
	require.NoError(t, err)

	res := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome, "a redirect is not followed, and is not a result")
	require.Contains(t, res.Detail, "HTTP 307")
	require.Equal(t, "Bearer sk_test_1", auth)
	require.Equal(t, "refund-OP-1-a1", key)
	require.Equal(t, "application/x-www-form-urlencoded", contentType)
	require.Nil(t, mine.CheckRedirect)
	require.Equal(t, time.Hour, mine.Timeout)
}
