package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain/clock"
)

// TestRateLimitPerToken: each token has its own bucket; past it a request
// is 429 rate.limited with Retry-After, does nothing, and is counted; the
// bucket refills with the limiter's clock; open endpoints are not limited.
func TestRateLimitPerToken(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(start)
	e := newEnv(t, func(c *httpapi.Config) {
		c.RateLimit = httpapi.RateLimit{PerSecond: 0.5, Burst: 3, Clock: clk}
	})
	read := func(role httpapi.Role) response { return e.call(role, "GET", "/v1/escalations", nil) }
	for range 3 {
		e.must(http.StatusOK, read(httpapi.RoleAuditor))
	}
	r := e.must(http.StatusTooManyRequests, read(httpapi.RoleAuditor))
	require.Equal(t, httpapi.CodeRateLimited, r.code())
	require.Equal(t, "2", r.header.Get("Retry-After"), "one request at 0.5/s is 2 s away")
	require.Contains(t, r.body["error"].(map[string]any)["message"], "auditor")

	// Another token is not affected, and a limited write changes nothing.
	e.must(http.StatusOK, read(httpapi.RoleAgent))
	e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-rl-a"), "Idempotency-Key", "rl-a"))
	again := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-rl-a"), "Idempotency-Key", "rl-a"))
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	e.must(http.StatusTooManyRequests, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-rl-b"), "Idempotency-Key", "rl-b"))

	// Unknown tokens and open endpoints are not counted against anyone.
	for range 5 {
		e.must(http.StatusUnauthorized, e.call("", "GET", "/v1/escalations", nil, "Authorization", "Bearer unknown-token-0123456789"))
		e.must(http.StatusOK, e.call("", "GET", "/healthz", nil))
	}

	clk.Advance(time.Second)
	e.must(http.StatusTooManyRequests, read(httpapi.RoleAuditor))
	clk.Advance(time.Second)
	e.must(http.StatusOK, read(httpapi.RoleAuditor))
	r = e.must(http.StatusTooManyRequests, read(httpapi.RoleAuditor))
	require.Equal(t, "2", r.header.Get("Retry-After"))

	// The limited write had done nothing: sent again it creates, not replays.
	clk.Advance(2 * time.Second)
	created := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-rl-b"), "Idempotency-Key", "rl-b"))
	require.Empty(t, created.header.Get("Idempotent-Replayed"))

	m := e.must(http.StatusOK, e.call("", "GET", "/metrics", nil))
	require.Contains(t, string(m.raw), `opledger_rate_limited_total{role="auditor"} 3`)
	require.Contains(t, string(m.raw), `opledger_rate_limited_total{role="agent"} 1`)
	require.Contains(t, string(m.raw), `opledger_http_requests_total{code="429",route="GET /v1/escalations"} 3`)
}

// TestRateLimitConfig: nonsense settings are refused at construction, Off
// lets everything through.
func TestRateLimitConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *httpapi.Config) { c.RateLimit = httpapi.RateLimit{Off: true, Burst: 1, PerSecond: 0.001} })
	for range 5 {
		e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/escalations", nil))
	}
	cfg := httpapi.Config{Ledger: e.h, Signer: e.signer, Tokens: e.tokens, ReadModels: e.pool, RateLimit: httpapi.RateLimit{PerSecond: -1}}
	_, err := httpapi.New(cfg)
	require.ErrorContains(t, err, "RateLimit")
	require.True(t, strings.Contains(err.Error(), "positive"))
}
