package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// TestInputIsRefusedPrecisely: unknown fields, oversized, malformed and
// trailing bodies, bad path ids, unknown routes and methods all answer JSON
// errors with a stable code, naming the field where there is one.
func TestInputIsRefusedPrecisely(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *httpapi.Config) { c.MaxBodyBytes = 1024 })
	key := []string{"Idempotency-Key", "input-1"}

	r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations",
		`{"order_id":"O","amount_minor":1,"currency":"EUR","amount":5}`, key...))
	require.Equal(t, httpapi.CodeRequestUnknownField, r.code())
	require.Equal(t, "amount", r.field())

	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleWorker, "POST", "/v1/claims",
		`{"message_id":"M","operation_id":"OP-1","capability":"x","worker_id":"w","amount_minor":1}`))
	require.Equal(t, "amount_minor", r.field(), "a claim never takes an amount from the message")

	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations/OP-1/decisions",
		`{"approver":"a","approval_limit_minor":1,"facts":{"order_refundable":true,"chargeback_open":false,"refunded_minor":0,"vip":true}}`))
	require.Equal(t, "facts.vip", r.field())

	big := `{"order_id":"` + strings.Repeat("A", 2000) + `","amount_minor":1,"currency":"EUR"}`
	r = e.must(http.StatusRequestEntityTooLarge, e.call(httpapi.RoleAgent, "POST", "/v1/operations", big, key...))
	require.Equal(t, httpapi.CodeRequestTooLarge, r.code())

	for name, body := range map[string]string{
		"not json":  `order_id=O`,
		"truncated": `{"order_id":"O",`,
		"two":       `{"order_id":"O","amount_minor":1,"currency":"EUR"} {}`,
		"array":     `[1,2]`,
		"empty":     ``,
	} {
		r := e.must(http.StatusBadRequest, e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, key...))
		require.Equal(t, httpapi.CodeRequestMalformed, r.code(), name)
	}

	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/4471", nil))
	require.Equal(t, "id", r.field())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleWorker, "POST", "/v1/executions/OP-1/lease", `{"lease_epoch":1}`))
	require.Equal(t, "id", r.field())
	r = e.must(http.StatusNotFound, e.call(httpapi.RoleWorker, "POST", "/v1/executions/EXE-UUIDLIKE/lease", `{"lease_epoch":1}`))
	require.Equal(t, "execution.unknown", r.code())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAuditor, "GET", "/v1/evidence?limit=100000", nil))
	require.Equal(t, "limit", r.field())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAuditor, "GET", "/v1/evidence?since=yesterday", nil))
	require.Equal(t, "since", r.field())
	r = e.must(http.StatusBadRequest, e.call(httpapi.RoleAuditor, "GET", "/v1/escalations?cursor=zzz", nil))
	require.Equal(t, "cursor", r.field())

	r = e.must(http.StatusNotFound, e.call(httpapi.RoleAgent, "GET", "/v1/nothing", nil))
	require.Equal(t, httpapi.CodeNotFound, r.code())
	r = e.must(http.StatusMethodNotAllowed, e.call(httpapi.RoleAgent, "DELETE", "/v1/operations", nil))
	require.Equal(t, httpapi.CodeMethodNotAllowed, r.code())
	require.Contains(t, r.header.Get("Allow"), "POST")

	// Nothing above reached the ledger.
	require.Empty(t, e.streamTypes(httpapi.OperationIDForKey("input-1").StreamName()))
}
