package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
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
	for _, want := range []string{`opledger_escalated_oldest_age_seconds 0`, `opledger_executions_past_lease 0`, `opledger_executions_past_lease_oldest_seconds 0`} {
		require.Contains(t, text, want+"\n")
	}
	require.NotContains(t, text, "opledger_digest_", "a process that signs no digest shows no digest series")

	// Ten minutes on, the worker's execution is past its lease (no sweeper
	// runs here); serve's digest role reports its schedule and a tick.
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "10m"}))
	m.DigestSchedule(time.Hour)
	m.ObserveDigest(time.Unix(1_800_000_000, 0))
	text = string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	for _, want := range []string{
		`opledger_executions_past_lease 1`,
		`opledger_digest_interval_seconds 3600`,
		`opledger_digest_last_signed_timestamp_seconds 1.8e+09`,
		`opledger_unknown_oldest_age_seconds 690`,
	} {
		require.Contains(t, text, want+"\n")
	}
	require.Regexp(t, `opledger_executions_past_lease_oldest_seconds [1-9][0-9]*`, text)
}

// TestReadinessReportsEachRole: /readyz lists every background role with
// its state; one role down (the relay cannot reach Kafka, a role waiting to
// restart) makes it 503 naming that role, and back up it is 200 again.
func TestReadinessReportsEachRole(t *testing.T) {
	t.Parallel()
	since := start
	var mu sync.Mutex
	roles := []httpapi.RoleStatus{
		{Role: "projector", State: httpapi.RoleRunning, OK: true, Since: &since},
		{Role: "sweeper", State: httpapi.RoleRunning, OK: true},
		{Role: "reconciler", State: httpapi.RoleDisabled, OK: true},
		{Role: "relay", State: httpapi.RoleRunning, OK: true},
	}
	set := func(i int, st httpapi.RoleStatus) { mu.Lock(); roles[i] = st; mu.Unlock() }
	e := newEnv(t, func(c *httpapi.Config) {
		c.Status.Roles = func(context.Context) []httpapi.RoleStatus {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(roles)
		}
	})
	r := e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Equal(t, "ready", r.str("status"))
	listed := r.body["roles"].([]any)
	require.Len(t, listed, 4)
	require.Equal(t, map[string]any{"role": "projector", "state": "running", "ok": true, "restarts": float64(0), "since": "2026-11-26T14:02:10Z"}, listed[0])

	set(3, httpapi.RoleStatus{Role: "relay", State: httpapi.RoleRunning, OK: false, Detail: "cannot reach Kafka: dial tcp 127.0.0.1:9: connection refused"})
	r = e.must(http.StatusServiceUnavailable, e.call("", "GET", "/readyz", nil))
	require.Equal(t, httpapi.CodeNotReady, r.code())
	require.Equal(t, "not-ready", r.str("status"))
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, r.body["error"].(map[string]any)["message"], "relay running: cannot reach Kafka")
	relay := r.body["roles"].([]any)[3].(map[string]any)
	require.Equal(t, false, relay["ok"])

	set(1, httpapi.RoleStatus{Role: "sweeper", State: httpapi.RoleRestarting, Restarts: 2, LastError: "sweep: store unavailable"})
	set(3, httpapi.RoleStatus{Role: "relay", State: httpapi.RoleRunning, OK: true})
	r = e.must(http.StatusServiceUnavailable, e.call("", "GET", "/readyz", nil))
	require.Contains(t, r.body["error"].(map[string]any)["message"], "sweeper restarting: sweep: store unavailable")
	require.NotContains(t, r.body["error"].(map[string]any)["message"], "relay")

	set(1, httpapi.RoleStatus{Role: "sweeper", State: httpapi.RoleRunning, OK: true, Restarts: 2})
	e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
}

// TestMetricsShowRolesRelayQueueAndSetAside: the series fed by Status are
// on /metrics, with the build info; a failing source counts a scrape error
// and leaves the other series alone.
func TestMetricsShowRolesRelayQueueAndSetAside(t *testing.T) {
	t.Parallel()
	var queueErr error
	e := newEnv(t, func(c *httpapi.Config) {
		c.Status = httpapi.Status{
			Roles: func(context.Context) []httpapi.RoleStatus {
				return []httpapi.RoleStatus{
					{Role: "projector", State: httpapi.RoleRunning, OK: true},
					{Role: "relay", State: httpapi.RoleRestarting, Restarts: 3},
					{Role: "reconciler", State: httpapi.RoleDisabled, OK: true},
				}
			},
			RelayLag: func(context.Context) ([]httpapi.RelayLag, error) {
				return []httpapi.RelayLag{{Relay: "refund-requests", Events: 5, Behind: 7 * time.Second}}, nil
			},
			Queue: func(context.Context) ([]httpapi.QueueDepth, error) {
				return []httpapi.QueueDepth{{Topic: "opledger.refund-requests", Ready: 4, Hidden: 2, DeadLetters: 1}}, queueErr
			},
			SetAside: func(context.Context) ([]setaside.Count, error) {
				return []setaside.Count{{Role: setaside.RoleSweeper, SetAside: 2, Retrying: 1}}, nil
			},
		}
	})
	text := string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	for _, want := range []string{
		`opledger_role_up{role="projector"} 1`,
		`opledger_role_up{role="relay"} 0`,
		`opledger_role_restarts{role="relay"} 3`,
		`opledger_relay_lag_events{relay="refund-requests"} 5`,
		`opledger_relay_lag_seconds{relay="refund-requests"} 7`,
		`opledger_queue_depth{state="ready",topic="opledger.refund-requests"} 4`,
		`opledger_queue_depth{state="hidden",topic="opledger.refund-requests"} 2`,
		`opledger_queue_dead_letters{topic="opledger.refund-requests"} 1`,
		`opledger_set_aside_items{role="sweeper",state="set_aside"} 2`,
		`opledger_set_aside_items{role="sweeper",state="retrying"} 1`,
		`opledger_build_info{go_version="` + runtime.Version() + `",revision=`,
	} {
		require.Contains(t, text, want)
	}
	require.NotContains(t, text, `role="reconciler"`, "a role disabled here has no series")
	queueErr = errors.New("queue table gone")
	text = string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	require.Contains(t, text, `opledger_metrics_scrape_errors_total{gauge="queue"} 1`)
	require.Contains(t, text, `opledger_queue_depth{state="ready",topic="opledger.refund-requests"} 4`, "a failed source keeps its last values")
	require.Contains(t, text, `opledger_relay_lag_events{relay="refund-requests"} 5`)
}

// Replication as last checked is on /readyz and /metrics; not synchronous
// leaves serve ready unless it is required, then /readyz is 503 naming it.
func TestReadinessAndMetricsShowReplication(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	repl := httpapi.Replication{Detail: "NOT synchronous: synchronous_standby_names is empty"}
	e := newEnv(t, func(c *httpapi.Config) {
		c.Status.Replication = func() httpapi.Replication { mu.Lock(); defer mu.Unlock(); return repl }
	})
	set := func(r httpapi.Replication) { mu.Lock(); repl = r; mu.Unlock() }

	r := e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	got := r.body["replication"].(map[string]any)
	require.Equal(t, false, got["synchronous"])
	require.Equal(t, false, got["required"])
	require.Contains(t, got["detail"], "synchronous_standby_names is empty")
	text := string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	require.Contains(t, text, "opledger_replication_synchronous 0")
	require.Contains(t, text, "opledger_replication_sync_standbys 0")

	set(httpapi.Replication{Required: true, Detail: "NOT synchronous: no standby is synchronous now"})
	r = e.must(http.StatusServiceUnavailable, e.call("", "GET", "/readyz", nil))
	require.Contains(t, r.body["error"].(map[string]any)["message"], "replication required: NOT synchronous: no standby is synchronous now")

	at := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	set(httpapi.Replication{Required: true, Synchronous: true, SyncStandbys: 2, Detail: "synchronous: ...", CheckedAt: &at})
	r = e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Equal(t, true, r.body["replication"].(map[string]any)["synchronous"])
	require.Equal(t, "2026-12-01T14:00:00Z", r.body["replication"].(map[string]any)["checked_at"])
	text = string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	require.Contains(t, text, "opledger_replication_synchronous 1")
	require.Contains(t, text, "opledger_replication_sync_standbys 2")
}
