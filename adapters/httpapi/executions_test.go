package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

func (e *env) post(role httpapi.Role, path string, body any) response {
	e.t.Helper()
	return e.call(role, "POST", path, body)
}

// TestLeaseAndOutcome: renewals under the epoch; the outcome recorded once.
func TestLeaseAndOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("lease-1")
	path, secret := "/v1/executions/"+string(x), e.secret(x)

	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "30s"}))
	r := e.must(http.StatusOK, e.post(httpapi.RoleWorker, path+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": secret, "lease_seconds": 120, "worker_id": "worker-1"}))
	require.Equal(t, start.Add(30*time.Second+120*time.Second).Format(time.RFC3339), r.str("lease_expires_at"))
	require.EqualValues(t, 1, r.body["lease_epoch"])

	// Another worker's name does not hold this lease.
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": secret, "worker_id": "worker-2"}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())

	// A late outcome for an execution that is still Executing is refused.
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed", "late": true}))
	require.Equal(t, string(domain.ReasonExecutionNotUnknown), r.code())

	r = e.must(http.StatusOK, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{
		"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed", "provider_reference": "re_1", "detail": "201 from provider",
	}))
	require.Equal(t, "Completed", r.str("outcome"))
	require.Equal(t, false, r.body["late"])
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecCompleted, s.Execution(x).State)

	// Recording again is refused: the execution no longer runs.
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "NotApplied"}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())

	// Malformed outcomes name the field; unknown executions are 404.
	r = e.must(http.StatusBadRequest, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Done"}))
	require.Equal(t, "outcome", r.field())
	r = e.must(http.StatusBadRequest, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_secret": secret, "outcome": "Completed"}))
	require.Equal(t, "lease_epoch", r.field())
	r = e.must(http.StatusNotFound, e.post(httpapi.RoleWorker, "/v1/executions/"+domain.ChildID(domain.PrefixExecution, op, 9)+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed"}))
	require.Equal(t, string(domain.ReasonExecutionUnknown), r.code())
}

// TestStaleEpochIsFenced: once the lease lapsed (epoch 1 → 2), the old
// executor's renewal and outcome are refused lease.lost and recorded as
// evidence; it may only record its definite result as a late outcome, once.
func TestStaleEpochIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("stale-1")
	path, secret := "/v1/executions/"+string(x), e.secret(x)

	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "61s"}))
	lapsed, err := e.h.LapseLease(t.Context(), op, domain.LapseLease{ExecutionID: x}, ledgerCause) // the sweeper's work
	require.NoError(t, err)
	require.Equal(t, int64(2), lapsed.ToEpoch)

	r := e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": secret}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed", "provider_reference": "re_1"}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecUnknown, s.Execution(x).State, "a stale write changes nothing")

	// Late evidence: only definite outcomes, only epochs once held.
	r = e.must(http.StatusBadRequest, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Unknown", "late": true}))
	require.Equal(t, "outcome", r.field())
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 5, "lease_secret": secret, "outcome": "Completed", "late": true}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())
	r = e.must(http.StatusOK, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed", "provider_reference": "re_1", "late": true}))
	require.Equal(t, true, r.body["late"])
	r = e.must(http.StatusConflict, e.post(httpapi.RoleWorker, path+"/outcome", map[string]any{"lease_epoch": 1, "lease_secret": secret, "outcome": "NotApplied", "late": true}))
	require.Equal(t, string(domain.ReasonExecutionNotUnknown), r.code())

	s, err = e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecCompleted, s.Execution(x).State)
	require.Equal(t, "re_1", s.Execution(x).ProviderReference)

	// Each refused write was recorded with what the executor tried to say:
	// the stale renewal and outcome, the late Unknown (400), the late epoch
	// 5 and the late outcome once Completed.
	refused := 0
	for _, typ := range e.streamTypes(domain.EvidenceStreamOf(op)) {
		if typ == domain.TypeWriteRefused {
			refused++
		}
	}
	require.Equal(t, 5, refused)
}
