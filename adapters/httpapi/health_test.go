package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/recovery"
	"opledger/domain/worker"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	var stalled error
	e := newEnv(t, func(c *httpapi.Config) {
		c.Ready = func(ctx context.Context) error { return stalled }
	})
	r := e.must(http.StatusOK, e.call("", "GET", "/healthz", nil))
	require.Equal(t, "ok", r.str("status"))
	r = e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Equal(t, "ready", r.str("status"))
	stalled = errors.New("projector stalled: 120s behind")
	r = e.must(http.StatusServiceUnavailable, e.call("", "GET", "/readyz", nil))
	require.Equal(t, httpapi.CodeNotReady, r.code())
	require.Contains(t, string(r.raw), "projector stalled")
}

// TestMetrics: one scrape shows the API's counters, the read models'
// gauges, and what the other roles reported through the hooks.
func TestMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("metrics-1")
	e.claim(op, "MSG-metrics-1", "forged.token")
	e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x)+"/outcome",
		map[string]any{"lease_epoch": 1, "lease_secret": e.secret(x), "outcome": "Unknown", "detail": "timeout"}))
	e.must(http.StatusConflict, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x)+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": e.secret(x)}))
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "90s"}))

	m := e.api.Metrics()
	m.ObserveSend(t.Context(), provider.Send{Kind: provider.SendCreate, Outcome: domain.Completed, Latency: 40 * time.Millisecond})
	m.ObserveReconcile([]recovery.Step{{Verdict: recovery.VerdictEscalated}, {Verdict: recovery.VerdictCompleted}})

	// The worker's own claims, through the instrumented ledger.
	var l worker.Ledger = httpapi.InstrumentLedger(e.h, m)
	_, token := e.allow(e.create("metrics-2"))
	claims, err := e.signer.Verify(token)
	require.NoError(t, err)
	out, err := l.Claim(t.Context(), claims.OperationID, domain.Claim{MessageID: "MSG-W", CapabilityID: claims.CapabilityID, WorkerID: "w"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, out.Status)

	var text string
	waitFor(t, "the read models to show both executions", func() bool {
		r := e.must(http.StatusOK, e.call("", "GET", "/metrics", nil))
		text = string(r.raw)
		return strings.Contains(text, `opledger_executions{state="Unknown"} 1`) &&
			strings.Contains(text, `opledger_executions{state="Executing"} 1`)
	})
	for _, want := range []string{
		`opledger_claims_total{status="Claimed"} 2`,
		`opledger_claims_total{status="Invalid"} 1`,
		`opledger_refusals_total{reason="capability.invalid"} 1`,
		`opledger_refusals_total{reason="lease.lost"} 1`,
		`opledger_unknown_oldest_age_seconds 90`,
		`opledger_projection_lag_events`,
		`opledger_reconciler_results_total{verdict="escalated"} 1`,
		`opledger_provider_requests_total{kind="create",outcome="Completed"} 1`,
		`opledger_provider_request_duration_seconds_count{kind="create"} 1`,
		`opledger_http_requests_total{code="201",route="POST /v1/operations"} 2`,
		`go_goroutines`,
	} {
		require.True(t, strings.Contains(text, want), "/metrics lacks %s", want)
	}
	require.NotContains(t, text, "worker-token-0123456789")
}
