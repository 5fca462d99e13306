package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/regression"
	"opledger/eventstore"
)

// TestHealthRaisesTheLogRegressionAlarm: a log regression a worker
// recorded shows on the health page, for every role, until an operator
// acknowledges it there with a note; auditors see no form.
func TestHealthRaisesTheLogRegressionAlarm(t *testing.T) {
	s := newServed(t)
	ctx := context.Background()
	auditor := s.browser(s.srv.URL)
	auditor.signIn(httpapi.RoleAuditor)
	require.Contains(t, auditor.get("/ui/health").text(), "No log regression is unacknowledged")

	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: s.store, Noticer: "worker-2"})
	require.NoError(t, err)
	rec.ObserveRegression(ctx, eventstore.Regression{Cache: domain.CacheWorker, Stream: "operation-OP-4471", SeenVersion: 9, SeenEventID: "ev-9",
		HeldVersion: 6, Detail: "operation-OP-4471 went back", Context: []domain.SeenExecution{{ExecutionID: "EXE-4471.2",
			IdempotencyKey: "refund-OP-4471-a2", State: domain.ExecCompleted, ProviderReference: "re_lost"}}})

	p := auditor.get("/ui/health")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.text(), "The store lost acknowledged writes")
	require.Contains(t, p.text(), "worker-2 worker_cache")
	require.Contains(t, p.text(), "EXE-4471.2 Completed refund-OP-4471-a2 ref re_lost")
	require.NotContains(t, p.body, "/ui/regressions/acknowledge", "only an operator acknowledges")

	op := s.browser(s.srv.URL)
	op.signIn(httpapi.RoleOperator)
	p = op.get("/ui/health")
	require.Contains(t, p.body, `action="/ui/regressions/acknowledge"`)
	csrf := p.csrf(t)
	require.Equal(t, http.StatusBadRequest, op.post("/ui/regressions/acknowledge", url.Values{"csrf": {csrf}, "note": {" "}}).status)
	require.Equal(t, http.StatusForbidden, auditor.post("/ui/regressions/acknowledge", url.Values{"csrf": {csrf}, "note": {"x"}}).status)
	require.Equal(t, http.StatusSeeOther, op.post("/ui/regressions/acknowledge", url.Values{"csrf": {csrf}, "note": {"worker-2's refund re_lost escalated and resolved"}}).status)
	require.Contains(t, op.get("/ui/health").text(), "No log regression is unacknowledged (the last acknowledged by olga")
	require.Equal(t, "olga", s.regressions.Status().LastAcknowledged.Operator)
}
