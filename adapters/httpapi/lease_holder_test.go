package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/ledger"
)

// Two worker tokens, so that two workers can be told apart.
const (
	workerAToken = "worker-a-token-0123456789"
	workerBToken = "worker-b-token-0123456789"
)

const twoWorkersTokenFile = tokenFile + `
worker   ` + workerAToken + `  worker-a
worker   ` + workerBToken + `  worker-b
`

func newTwoWorkerEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, func(cfg *httpapi.Config) {
		tokens, err := httpapi.ParseTokens(strings.NewReader(twoWorkersTokenFile), "tokens")
		require.NoError(t, err)
		cfg.Tokens = tokens
	})
}

// as sends a request with a bearer token of its own.
func (e *env) as(token, method, path string, body any) response {
	e.t.Helper()
	return e.call("", method, path, body, "Authorization", "Bearer "+token)
}

// TestOnlyTheLeaseHolderWrites: worker B knows worker A's execution id and
// lease epoch (it reads both from GET /v1/operations/{id}) and even holds a
// genuine secret of an execution of its own. None of it lets B end, renew
// or late-resolve A's execution: every attempt is 409 lease.not-held (400
// naming the field for hostile text) and recorded as WriteRefused, without
// the secret it presented. A, holding the secret its claim returned, still
// renews and hands in its late evidence.
func TestOnlyTheLeaseHolderWrites(t *testing.T) {
	t.Parallel()
	e := newTwoWorkerEnv(t)
	op := e.create("holder-1")
	_, token := e.allow(op)
	claim := e.must(http.StatusOK, e.as(workerAToken, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-holder-1", "operation_id": string(op), "capability": token, "worker_id": "worker-a",
	}))
	require.Equal(t, "Claimed", claim.str("status"), "body: %s", claim.raw)
	require.Equal(t, "no-store", claim.header.Get("Cache-Control"), "the answer carries a secret")
	secretA := claim.str("lease_secret")
	require.Len(t, secretA, 43)

	// B's own execution, on another operation: a genuine secret, of another lease.
	other := e.create("holder-2")
	_, otherToken := e.allow(other)
	claimB := e.must(http.StatusOK, e.as(workerBToken, "POST", "/v1/claims", map[string]any{
		"message_id": "MSG-holder-2", "operation_id": string(other), "capability": otherToken, "worker_id": "worker-b",
	}))
	secretB := claimB.str("lease_secret")
	require.NotEmpty(t, secretB)
	require.NotEqual(t, secretA, secretB)

	// B reads what it needs to forge a write: the execution id and epoch.
	read := e.waitReadAs(workerBToken, "/v1/operations/"+string(op), func(r response) bool {
		xs, _ := r.body["executions"].([]any)
		return r.status == http.StatusOK && len(xs) == 1
	})
	xr := read.body["executions"].([]any)[0].(map[string]any)
	x := domain.ExecutionID(xr["execution_id"].(string))
	epoch := xr["lease_epoch"]
	require.EqualValues(t, 1, epoch)
	require.NotContains(t, string(read.raw), secretA)
	path := "/v1/executions/" + string(x)

	forged := []map[string]any{
		{"lease_epoch": epoch},                               // no secret
		{"lease_epoch": epoch, "lease_secret": ""},           // empty
		{"lease_epoch": epoch, "lease_secret": "guess"},      // guessed
		{"lease_epoch": epoch, "lease_secret": secretB},      // another lease's
		{"lease_epoch": epoch, "lease_secret": secretA[:42]}, // almost
	}
	for i, body := range forged {
		r := e.must(http.StatusConflict, e.as(workerBToken, "POST", path+"/lease", body))
		require.Equal(t, string(domain.ReasonLeaseNotHeld), r.code(), "renewal %d", i)
		end := map[string]any{"outcome": "NotApplied", "detail": "400 parameter_invalid"}
		for k, v := range body {
			end[k] = v
		}
		r = e.must(http.StatusConflict, e.as(workerBToken, "POST", path+"/outcome", end))
		require.Equal(t, string(domain.ReasonLeaseNotHeld), r.code(), "outcome %d", i)
	}
	// Hostile text is refused naming its field, and recorded all the same.
	r := e.must(http.StatusBadRequest, e.as(workerBToken, "POST", path+"/outcome", map[string]any{
		"lease_epoch": epoch, "lease_secret": "guess", "outcome": "NotApplied", "detail": "evil\u0000\u202e",
	}))
	require.Equal(t, "detail", r.field())
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecExecuting, s.Execution(x).State, "B changed nothing")
	require.Equal(t, domain.OpExecuting, s.Status())

	// A still holds its lease.
	e.must(http.StatusOK, e.as(workerAToken, "POST", path+"/lease", map[string]any{"lease_epoch": 1, "lease_secret": secretA}))

	// The lease lapses (A's process stalls): Unknown, epoch 2. B cannot
	// resolve it with late "evidence" at any epoch.
	e.must(http.StatusOK, e.post(httpapi.RoleOperator, "/v1/test-clock", map[string]any{"advance": "61s"}))
	_, err = e.h.LapseLease(t.Context(), op, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	for _, ep := range []int64{1, 2} {
		for _, secret := range []any{nil, "guess", secretB} {
			body := map[string]any{"lease_epoch": ep, "outcome": "NotApplied", "late": true}
			if secret != nil {
				body["lease_secret"] = secret
			}
			r := e.must(http.StatusConflict, e.as(workerBToken, "POST", path+"/outcome", body))
			require.Equal(t, string(domain.ReasonLeaseNotHeld), r.code(), "late epoch %d", ep)
		}
	}
	// A at an epoch it never held is lease.lost, not evidence.
	r = e.must(http.StatusConflict, e.as(workerAToken, "POST", path+"/outcome", map[string]any{
		"lease_epoch": 2, "lease_secret": secretA, "outcome": "Completed", "late": true,
	}))
	require.Equal(t, string(domain.ReasonLeaseLost), r.code())
	s, err = e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecUnknown, s.Execution(x).State, "still Unknown: the reconciler's to resolve, or A's")

	// A hands in its late evidence.
	r = e.must(http.StatusOK, e.as(workerAToken, "POST", path+"/outcome", map[string]any{
		"lease_epoch": 1, "lease_secret": secretA, "outcome": "Completed", "provider_reference": "re_A", "late": true,
	}))
	require.Equal(t, true, r.body["late"])
	s, err = e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecCompleted, s.Execution(x).State)
	require.Equal(t, "re_A", s.Execution(x).ProviderReference)

	// Every refused write is evidence: who sent it (the token's name), how
	// its secret compared, never the secret.
	recs, err := e.store.ReadStream(t.Context(), op.StreamName(), 0, 1000)
	require.NoError(t, err)
	evidence, err := e.store.ReadStream(t.Context(), domain.EvidenceStreamOf(op), 0, 1000)
	require.NoError(t, err)
	recs = append(recs, evidence...)
	byB, checks := 0, map[domain.SecretCheck]int{}
	for _, rec := range recs {
		require.NotContains(t, string(rec.Data), secretA, "%s holds the secret", rec.Type)
		require.NotContains(t, string(rec.Data), secretB, "%s holds B's secret", rec.Type)
		if rec.Type != domain.TypeWriteRefused {
			continue
		}
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(t, err)
		w := dec.Event.(domain.WriteRefused)
		if dec.Meta.Actor == "worker-b" {
			byB++
			require.NotEqual(t, domain.SecretHeld, w.SecretCheck, "B never held the lease")
		}
		checks[w.SecretCheck]++
	}
	require.Equal(t, 2*len(forged)+1+6, byB, "every forged write by B was recorded")
	require.Equal(t, 2*2+2, checks[domain.SecretMissing], "no secret, or an empty one")
	require.Equal(t, 1, checks[domain.SecretHeld], "A's late outcome at epoch 2")
	var hostile domain.WriteRefused
	for _, rec := range recs {
		if dec, err := codec.DecodeRecorded(rec); err == nil {
			ev := dec.Event
			if w, ok := ev.(domain.WriteRefused); ok && w.Field == "detail" {
				hostile = w
			}
		}
	}
	require.Equal(t, `evil\x00\u202e`, hostile.Detail, "kept escaped")
	require.Equal(t, []string{"detail"}, hostile.Escaped)
	require.Equal(t, domain.ReasonCommandInvalid, hostile.Reason)
}

// TestRefusedExecutorWritesAtTheEdgeAreRecorded: a body the API cannot read,
// a required field missing or a lease out of range is refused before the
// ledger sees a command, and recorded as WriteRefused all the same.
func TestRefusedExecutorWritesAtTheEdgeAreRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("edge-1")
	path := "/v1/executions/" + string(x)
	before := len(e.streamTypes(domain.EvidenceStreamOf(op)))
	cases := []struct {
		path, body string
		status     int
		field      string
	}{
		{path + "/outcome", `{"lease_epoch":1,"lease_secret":"s","outcome":"Completed","surprise":1}`, http.StatusBadRequest, "surprise"},
		{path + "/outcome", `{"lease_epoch":"one","outcome":"Completed"}`, http.StatusBadRequest, "lease_epoch"},
		{path + "/outcome", `{"lease_secret":"s","outcome":"Completed"}`, http.StatusBadRequest, "lease_epoch"},
		{path + "/outcome", `{"lease_epoch":1,"lease_secret":"s"}`, http.StatusBadRequest, "outcome"},
		{path + "/outcome", `not json`, http.StatusBadRequest, "body"},
		{path + "/lease", `{"lease_epoch":1,"lease_secret":"s","lease_seconds":0}`, http.StatusBadRequest, "lease_seconds"},
		{path + "/lease", `{"lease_secret":"s"}`, http.StatusBadRequest, "lease_epoch"},
		{path + "/lease", `{"lease_epoch":1,"lease_secret":"s","worker_id":"w\u0000"}`, http.StatusBadRequest, "worker_id"},
	}
	for i, c := range cases {
		r := e.must(c.status, e.call(httpapi.RoleWorker, "POST", c.path, c.body))
		require.Equal(t, c.field, r.field(), "case %d: %s", i, r.raw)
	}
	recs, err := e.store.ReadStream(t.Context(), domain.EvidenceStreamOf(op), int64(before), 1000)
	require.NoError(t, err)
	require.Len(t, recs, len(cases), "each refusal left its evidence")
	for i, rec := range recs {
		require.Equal(t, domain.TypeWriteRefused, rec.Type)
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(t, err)
		ev := dec.Event
		w := ev.(domain.WriteRefused)
		require.Equal(t, domain.ReasonCommandInvalid, w.Reason, "case %d", i)
		require.Equal(t, cases[i].field, w.Field, "case %d", i)
		require.NotEmpty(t, w.RefusalDetail, "case %d", i)
	}
	s, err := e.h.Load(t.Context(), op)
	require.NoError(t, err)
	require.Equal(t, domain.ExecExecuting, s.Execution(x).State)
}

// waitReadAs is waitRead with a token of its own.
func (e *env) waitReadAs(token, path string, ok func(r response) bool) response {
	e.t.Helper()
	var last response
	waitFor(e.t, "the read model to show "+path, func() bool {
		last = e.as(token, "GET", path, nil)
		return ok(last)
	})
	return last
}
