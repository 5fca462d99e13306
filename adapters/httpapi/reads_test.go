package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// TestReads: an operation with its executions from the read models, its
// stream decoded from the store, and the evidence filtered and paged.
func TestReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op, x := e.execute("read-1")
	e.must(http.StatusOK, e.post(httpapi.RoleWorker, "/v1/executions/"+string(x)+"/outcome",
		map[string]any{"lease_epoch": 1, "lease_secret": e.secret(x), "outcome": "Completed", "provider_reference": "re_9"}))
	_, token := e.allow(e.create("read-2"))
	for _, msg := range []string{"MSG-R1", "MSG-R2", "MSG-R3"} { // spent authority, three new messages
		e.claim(op, msg, token) // a token of read-2 presented for read-1: Invalid
	}

	r := e.waitRead("/v1/operations/"+string(op), func(r response) bool {
		return r.status == http.StatusOK && r.str("state") == "Completed"
	})
	require.Equal(t, string(op), r.str("operation_id"))
	require.EqualValues(t, 1, r.body["attempt"])
	require.EqualValues(t, 4500, r.body["amount_minor"])
	require.Equal(t, "EUR", r.str("currency"))
	require.Equal(t, "ORD-read-1", r.str("order_id"))
	require.Equal(t, "refund", r.str("kind"))
	require.Nil(t, r.body["export_id"])
	require.EqualValues(t, 0, r.body["uses_left"], "its one use is spent")
	require.NotEmpty(t, r.str("correlation_id"))
	xs := r.body["executions"].([]any)
	require.Len(t, xs, 1)
	require.Equal(t, map[string]any{
		"execution_id": string(x), "state": "Completed", "attempt": float64(1), "use": float64(1), "lease_epoch": float64(1),
		"idempotency_key": string(domain.IdempotencyKeyFor(op, 1)), "outcome": "Completed", "provider_reference": "re_9",
		"started_at": start.Format("2006-01-02T15:04:05Z07:00"), "ended_at": start.Format("2006-01-02T15:04:05Z07:00"),
	}, xs[0])
	r = e.must(http.StatusNotFound, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/OP-NOPE", nil))
	require.Equal(t, string(domain.ReasonOperationUnknown), r.code())

	// The stream itself, decoded, in pages.
	r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events?limit=2", nil))
	events := r.body["events"].([]any)
	require.Len(t, events, 2)
	ev0 := events[0].(map[string]any)
	require.Equal(t, domain.TypeOperationRequested, ev0["type"])
	require.EqualValues(t, 0, ev0["version"])
	require.Equal(t, "alice", ev0["metadata"].(map[string]any)["actor"])
	require.Equal(t, "ORD-read-1", ev0["data"].(map[string]any)["order_id"])
	require.EqualValues(t, 2, r.body["next_from"])
	r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events?from=2", nil))
	var types []string
	for _, ev := range r.body["events"].([]any) {
		types = append(types, ev.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{domain.TypeCapabilityIssued, domain.TypeClaimed, domain.TypeOutcomeRecorded}, types)
	require.Equal(t, "operation-"+string(op), r.body["stream"])
	// What others presented is in its evidence stream.
	r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events?stream=evidence", nil))
	require.Equal(t, domain.EvidenceStreamOf(op), r.body["stream"])
	types = nil
	for _, ev := range r.body["events"].([]any) {
		types = append(types, ev.(map[string]any)["type"].(string))
	}
	require.Equal(t, []string{domain.TypePresentationRejected, domain.TypePresentationRejected, domain.TypePresentationRejected}, types)
	e.must(http.StatusBadRequest, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events?stream=other", nil))
	require.Nil(t, r.body["next_from"])
	e.must(http.StatusNotFound, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/OP-NOPE/events", nil))

	// Evidence: filtered by reason and operation, paged by cursor.
	path := "/v1/evidence?reason=capability.wrong-operation&operation_id=" + string(op)
	e.waitRead(path, func(r response) bool {
		return r.status == http.StatusOK && len(r.body["evidence"].([]any)) == 3
	})
	var msgs []any
	cursor := ""
	for range 4 { // bounded: three pages of one, then nothing more
		r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", path+"&limit=1&cursor="+cursor, nil))
		for _, it := range r.body["evidence"].([]any) {
			item := it.(map[string]any)
			msgs = append(msgs, item["message_id"])
			require.Equal(t, false, item["execution_attempted"])
			require.Equal(t, false, item["replay_suspected"])
			require.NotEmpty(t, item["capability_id"])
			require.NotEmpty(t, item["recorded_at"])
		}
		if cursor = r.str("next_cursor"); cursor == "" {
			break
		}
	}
	require.Equal(t, []any{"MSG-R1", "MSG-R2", "MSG-R3"}, msgs)
	r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/evidence?since=2030-01-01T00:00:00Z", nil))
	require.Empty(t, r.body["evidence"])
	r = e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/evidence?reason=capability.expired", nil))
	require.Empty(t, r.body["evidence"])
}
