package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// escalate drives an execution to Escalated: its lease lapses, its stale
// executor's write is refused (evidence), and the reconciler gives up.
func (e *env) escalate(key string) (domain.OperationID, domain.ExecutionID) {
	e.t.Helper()
	op, x := e.execute(key)
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "61s"}))
	_, err := e.h.LapseLease(e.t.Context(), op, domain.LapseLease{ExecutionID: x}, ledgerCause)
	require.NoError(e.t, err)
	e.must(http.StatusConflict, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x)+"/outcome",
		map[string]any{"lease_epoch": 1, "lease_secret": e.secret(x), "outcome": "Unknown", "detail": "timeout after sending"}))
	require.NoError(e.t, e.h.Escalate(e.t.Context(), op, domain.Escalate{
		ExecutionID: x, Reason: "provider lookup inconclusive", Detail: "5 lookups failed",
	}, ledgerCause))
	return op, x
}

// TestEscalationsQueueAndResolve: the queue lists escalated executions
// oldest first with their evidence; an operator resolves one, recorded as
// Reconciled by method operator naming the operator; resolving anything
// not Unknown or Escalated is 409.
func TestEscalationsQueueAndResolve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op1, x1 := e.escalate("esc-1")
	op2, x2 := e.escalate("esc-2")

	r := e.waitRead("/v1/escalations", func(r response) bool {
		return r.status == http.StatusOK && len(r.body["escalations"].([]any)) == 2
	})
	items := r.body["escalations"].([]any)
	first := items[0].(map[string]any)
	require.Equal(t, string(x1), first["execution_id"], "oldest first")
	require.Equal(t, string(op1), first["operation_id"])
	require.Equal(t, "provider lookup inconclusive", first["escalation_reason"])
	require.Equal(t, "5 lookups failed", first["escalation_detail"])
	require.EqualValues(t, 4500, first["amount_minor"])
	require.EqualValues(t, 2, first["lease_epoch"])
	require.NotNil(t, first["unknown_since"])
	evidence := first["evidence"].([]any)
	require.Len(t, evidence, 1)
	ev := evidence[0].(map[string]any)
	require.Equal(t, "WriteRefused", ev["kind"])
	require.Equal(t, string(domain.ReasonLeaseLost), ev["reason"])
	require.Equal(t, "Unknown", ev["outcome"])
	require.Equal(t, string(x2), items[1].(map[string]any)["execution_id"])

	// Paging: one at a time, with a cursor.
	r = e.must(http.StatusOK, e.call(httpapi.RoleOperator, "GET", "/v1/escalations?limit=1", nil))
	require.Len(t, r.body["escalations"], 1)
	cursor := r.str("next_cursor")
	require.NotEmpty(t, cursor)
	r = e.must(http.StatusOK, e.call(httpapi.RoleOperator, "GET", "/v1/escalations?limit=1&cursor="+cursor, nil))
	require.Equal(t, string(x2), r.body["escalations"].([]any)[0].(map[string]any)["execution_id"])
	require.Empty(t, r.str("next_cursor"))

	// Resolution needs an outcome and evidence.
	path := "/v1/executions/" + string(x1) + "/resolve"
	r = e.must(http.StatusBadRequest, e.post(httpapi.RoleOperator, path, map[string]any{"outcome": "Completed"}))
	require.Equal(t, "evidence", r.field())
	r = e.must(http.StatusBadRequest, e.post(httpapi.RoleOperator, path, map[string]any{"outcome": "Unknown", "evidence": "x"}))
	require.Equal(t, "outcome", r.field())

	r = e.must(http.StatusOK, e.post(httpapi.RoleOperator, path, map[string]any{
		"outcome": "Completed", "provider_reference": "re_42", "evidence": "provider dashboard shows re_42 succeeded",
	}))
	require.Equal(t, "olga", r.str("actor"))
	require.Equal(t, "operator", r.str("method"))
	s, err := e.h.Load(t.Context(), op1)
	require.NoError(t, err)
	require.Equal(t, domain.ExecCompleted, s.Execution(x1).State)
	recs, err := e.store.ReadStream(t.Context(), op1.StreamName(), s.Version, 1)
	require.NoError(t, err)
	rec := decode(t, recs[0]).(domain.Reconciled)
	require.Equal(t, domain.Reconciled{
		ExecutionID: x1, Outcome: domain.Completed, Method: domain.MethodOperator, ProviderReference: "re_42",
		Actor: "olga", Evidence: "provider dashboard shows re_42 succeeded", ReconciledAt: rec.ReconciledAt,
	}, rec)

	// Resolved, it is no longer resolvable, and leaves the queue.
	r = e.must(http.StatusConflict, e.post(httpapi.RoleOperator, path, map[string]any{"outcome": "NotApplied", "evidence": "x"}))
	require.Equal(t, string(domain.ReasonExecutionNotUnknown), r.code())
	e.waitRead("/v1/escalations", func(r response) bool {
		return r.status == http.StatusOK && len(r.body["escalations"].([]any)) == 1
	})

	// An Unknown (not escalated) execution is resolvable too; an Executing
	// one is not.
	op3, x3 := e.execute("esc-3")
	r = e.must(http.StatusConflict, e.post(httpapi.RoleOperator, "/v1/executions/"+string(x3)+"/resolve",
		map[string]any{"outcome": "NotApplied", "evidence": "x"}))
	require.Equal(t, string(domain.ReasonExecutionNotUnknown), r.code())
	e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x3)+"/outcome",
		map[string]any{"lease_epoch": 1, "lease_secret": e.secret(x3), "outcome": "Unknown", "detail": "connection reset"}))
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/executions/"+string(x3)+"/resolve",
		map[string]any{"outcome": "NotApplied", "evidence": "provider has no refund for this key"}))
	s, err = e.h.Load(t.Context(), op3)
	require.NoError(t, err)
	require.Equal(t, domain.ExecNotApplied, s.Execution(x3).State)
	_ = op2
}
