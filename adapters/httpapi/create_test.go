package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
)

// TestCreateOperationIsIdempotent: a repeat of a request under the same
// Idempotency-Key gets the very same answer, marked as replayed, and opens
// nothing new; the same key with another body is refused.
func TestCreateOperationIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	body := `{"order_id":"ORD-1","amount_minor":4500,"currency":"EUR","order_total_minor":12000}`
	first := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, "Idempotency-Key", "refund-ORD-1"))
	op := domain.OperationID(first.str("operation_id"))
	require.Equal(t, httpapi.OperationIDForKey("refund-ORD-1"), op)
	require.Equal(t, "Requested", first.str("state"))
	require.NotEmpty(t, first.str("correlation_id"))
	require.Empty(t, first.header.Get("Idempotent-Replayed"))
	require.Equal(t, "/v1/operations/"+string(op), first.header.Get("Location"))

	// The same request, written differently (order, spacing), later.
	again := `{ "currency": "EUR", "order_total_minor": 12000, "amount_minor": 4500, "order_id": "ORD-1" }`
	for range 2 {
		r := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", again, "Idempotency-Key", "refund-ORD-1"))
		require.Equal(t, string(first.raw), string(r.raw), "a replay is byte for byte the first answer")
		require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	}
	// Even after the operation moved on, the creation answer stays the same.
	e.allow(op)
	r := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, "Idempotency-Key", "refund-ORD-1"))
	require.Equal(t, string(first.raw), string(r.raw))

	// The same key for another request.
	other := `{"order_id":"ORD-1","amount_minor":9999,"currency":"EUR","order_total_minor":12000}`
	r = e.must(http.StatusUnprocessableEntity, e.call(httpapi.RoleAgent, "POST", "/v1/operations", other, "Idempotency-Key", "refund-ORD-1"))
	require.Equal(t, httpapi.CodeIdempotencyKeyReused, r.code())
	require.Empty(t, r.header.Get("Idempotent-Replayed"))

	// One OperationRequested, whatever was repeated.
	require.Equal(t, []string{domain.TypeOperationRequested, domain.TypeDecided, domain.TypeCapabilityIssued}, e.streamTypes(op.StreamName()))

	// A given correlation id is kept; another key is another operation.
	withCorr := refund("ORD-2")
	withCorr["correlation_id"] = "COR-2210"
	r = e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", withCorr, "Idempotency-Key", "refund-ORD-2"))
	require.Equal(t, "COR-2210", r.str("correlation_id"))
	require.NotEqual(t, string(op), r.str("operation_id"))
}

// TestCreateOperationRefusesBadInput names the field at fault.
func TestCreateOperationRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	post := func(body any, key string) response {
		if key == "" {
			return e.call(httpapi.RoleAgent, "POST", "/v1/operations", body)
		}
		return e.call(httpapi.RoleAgent, "POST", "/v1/operations", body, "Idempotency-Key", key)
	}
	r := e.must(http.StatusBadRequest, post(refund("ORD-1"), ""))
	require.Equal(t, "Idempotency-Key", r.field())

	cases := map[string]struct {
		body  string
		field string
	}{
		"no amount":        {`{"order_id":"O","currency":"EUR"}`, "amount_minor"},
		"zero amount":      {`{"order_id":"O","amount_minor":0,"currency":"EUR"}`, "amount_minor"},
		"amount as string": {`{"order_id":"O","amount_minor":"12","currency":"EUR"}`, "amount_minor"},
		"bad currency":     {`{"order_id":"O","amount_minor":1,"currency":"eur"}`, "currency"},
		"no order":         {`{"amount_minor":1,"currency":"EUR"}`, "order_id"},
		"order with space": {`{"order_id":"O 1","amount_minor":1,"currency":"EUR"}`, "order_id"},
		"negative total":   {`{"order_id":"O","amount_minor":1,"currency":"EUR","order_total_minor":-1}`, "order_total_minor"},
	}
	for name, c := range cases {
		r := e.must(http.StatusBadRequest, post(c.body, "k-"+name))
		require.Equal(t, httpapi.CodeRequestInvalid, r.code(), name)
		require.Equal(t, c.field, r.field(), name)
	}
}
