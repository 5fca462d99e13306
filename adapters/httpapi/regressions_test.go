package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore/postgres/pgtest"
)

// TestLogRegressionAlarmUntilAcknowledged, on PostgreSQL: the store loses
// an operation the API created (its rows deleted and its stream's head
// set back, as after a failover to an asynchronous standby). The create
// re-sent with its Idempotency-Key is written again, not replayed from
// the handler's cache; the regression is recorded, and /readyz, /metrics
// and GET /v1/regressions say so until an operator acknowledges it.
func TestLogRegressionAlarmUntilAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Equal(t, []any{}, r.body["alarms"], "no alarm before")

	key := "refund-regressed-1"
	body := refund("ORD-" + key) // what create sends
	op := e.create(key)
	replay := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, "Idempotency-Key", key))
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"), "a repeat while the store holds it is a replay")
	first := e.streamTypes(op.StreamName())
	require.Equal(t, []string{domain.TypeOperationRequested}, first)

	pgtest.Shorten(t, pgtest.URL(), e.store.Schema(), op.StreamName(), -1)
	again := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, "Idempotency-Key", key))
	require.Empty(t, again.header.Get("Idempotent-Replayed"), "written again, not replayed from memory")
	require.Equal(t, []string{domain.TypeOperationRequested}, e.streamTypes(op.StreamName()))

	r = e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Equal(t, "ready", r.str("status"), "the server works: it serves what the store holds")
	alarms := r.body["alarms"].([]any)
	require.Len(t, alarms, 1)
	require.Equal(t, httpapi.AlarmLogRegression, alarms[0].(map[string]any)["kind"])
	metrics := string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	require.Contains(t, metrics, `opledger_log_regressions_total{cache="state_cache"} 1`)
	require.Contains(t, metrics, "opledger_log_regression_unacknowledged 1")

	list := e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/regressions", nil))
	require.EqualValues(t, 1, list.body["unacknowledged"])
	reg := list.body["regressions"].([]any)[0].(map[string]any)
	require.Equal(t, op.StreamName(), reg["stream"])
	require.Equal(t, domain.CacheState, reg["cache"])
	require.EqualValues(t, 0, reg["seen_version"])
	require.EqualValues(t, -1, reg["held_version"])

	e.must(http.StatusForbidden, e.call(httpapi.RoleAgent, "POST", "/v1/regressions/acknowledge", map[string]any{"note": "x"}))
	bad := e.must(http.StatusBadRequest, e.call(httpapi.RoleOperator, "POST", "/v1/regressions/acknowledge", map[string]any{}))
	require.Equal(t, "note", bad.field())
	acked := e.must(http.StatusOK, e.call(httpapi.RoleOperator, "POST", "/v1/regressions/acknowledge",
		map[string]any{"note": "failover 14:02: the lost operation was written again"}))
	require.EqualValues(t, 0, acked.body["unacknowledged"])
	require.Equal(t, "olga", acked.body["last_acknowledged"].(map[string]any)["operator"], "the token's name, not the caller's say")
	none := e.must(http.StatusConflict, e.call(httpapi.RoleOperator, "POST", "/v1/regressions/acknowledge", map[string]any{"note": "again"}))
	require.Equal(t, httpapi.CodeNothingToAcknowledge, none.code())

	r = e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	require.Empty(t, r.body["alarms"])
	metrics = string(e.must(http.StatusOK, e.call("", "GET", "/metrics", nil)).raw)
	require.Contains(t, metrics, "opledger_log_regression_unacknowledged 0")
	require.Equal(t, []string{domain.TypeLogRegressed, domain.TypeLogRegressionAcknowledged}, e.streamTypes(domain.RegressionStream))
	require.False(t, strings.Contains(metrics, "operator-token"))
}

// TestLostEffectIsAnEscalation: a lost effect recorded in an operation's
// stream is an Escalated execution in the read models: GET /v1/escalations
// lists it with the effect's key and reference for a person, who resolves
// it as any escalation.
func TestLostEffectIsAnEscalation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("lost-effect-1")
	escalated, err := e.h.EscalateLostEffect(t.Context(), op, domain.EscalateLostEffect{LostExecutionID: domain.ExecutionID(strings.Replace(string(op), "OP-", "EXE-", 1) + ".1"),
		IdempotencyKey: domain.IdempotencyKey("refund-" + string(op) + "-a1"), ProviderReference: "re_lost_1", Outcome: domain.Completed,
		Source: domain.LostEffectByWorker, Detail: "201"}, ledger.Cause{Actor: "worker-1"})
	require.NoError(t, err)
	require.True(t, escalated)
	list := e.waitRead("/v1/escalations", func(r response) bool {
		items, _ := r.body["escalations"].([]any)
		return len(items) == 1
	})
	item := list.body["escalations"].([]any)[0].(map[string]any)
	require.Equal(t, string(domain.ReasonEffectLost), item["escalation_reason"])
	require.Equal(t, "refund-"+string(op)+"-a1", item["idempotency_key"])
	require.Contains(t, item["escalation_detail"], "made for execution")
	x := item["execution_id"].(string)
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/executions/"+x+"/resolve",
		map[string]any{"outcome": "Completed", "provider_reference": "re_lost_1", "evidence": "provider dashboard: re_lost_1 succeeded"}))
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.OpCompleted, s.Status())
}
