package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

// simError is the error object of a simulator answer.
type simError struct {
	Type, Code, Param, Message string
}

func errorOf(t *testing.T, r response) simError {
	t.Helper()
	var e struct {
		Error simError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(r.body, &e), "body %s", r.body)
	return e.Error
}

// requirePrintable fails when s holds a control or format character.
func requirePrintable(t *testing.T, s string) {
	t.Helper()
	require.False(t, strings.ContainsAny(s, "\x00\x1b\u202e\ufffd"), "%q", s)
}

// TestCreateRefusesMalformedInputWith400: exact names, no duplicates, one
// object, UTF-8 and printable text, in JSON and form bodies and the key;
// each a 400 invalid_request_error naming the parameter, echoing nothing
// unescaped, and creating no refund.
func TestCreateRefusesMalformedInputWith400(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	const okJSON = `{"amount":100,"currency":"EUR","order":"ORD-1","metadata":{"operation_id":"OP-1"}}`
	for _, c := range []struct {
		name, key, contentType, body, param string
	}{
		{"JSON case-variant", "k", "application/json", `{"amount":100,"Amount":99999999,"currency":"EUR","order":"ORD-1"}`, "Amount"},
		{"JSON duplicate", "k", "application/json", `{"amount":-5,"amount":5,"currency":"EUR","order":"ORD-1"}`, "amount"},
		{"JSON duplicate metadata key", "k", "application/json", `{"amount":5,"currency":"EUR","order":"ORD-1","metadata":{"operation_id":"OP-1","operation_id":"OP-2"}}`, "metadata[operation_id]"},
		{"JSON unknown nested", "k", "application/json", `{"amount":5,"currency":"EUR","order":"ORD-1","charge":{"id":"ch_1"}}`, "charge"},
		{"JSON NUL in order", "k", "application/json", `{"amount":5,"currency":"EUR","order":"ORD\u0000"}`, "order"},
		{"JSON RLO in metadata", "k", "application/json", `{"amount":5,"currency":"EUR","order":"ORD-1","metadata":{"operation_id":"OP-\u202e1"}}`, "metadata[operation_id]"},
		{"JSON invalid UTF-8", "k", "application/json", "{\"amount\":5,\"currency\":\"EUR\",\"order\":\"ORD-\xff\"}", "order"},
		{"JSON null", "k", "application/json", `null`, ""},
		{"JSON array", "k", "application/json", `[` + okJSON + `]`, ""},
		{"JSON string", "k", "application/json", `"amount=5"`, ""},
		{"JSON two objects", "k", "application/json", okJSON + okJSON, ""},
		{"JSON trailing garbage", "k", "application/json", okJSON + `;`, ""},
		{"form NUL in order", "k", form, "amount=5&currency=eur&order=ORD%00", "order"},
		{"form ESC in metadata", "k", form, "amount=5&currency=eur&order=ORD-1&metadata[operation_id]=OP-%1B%5B2J", "metadata[operation_id]"},
		{"form invalid UTF-8 metadata key", "k", form, "amount=5&currency=eur&order=ORD-1&metadata[op%FF]=x", `metadata[op\xff]`},
		{"form hostile unknown name", "k", form, "amount=5&currency=eur&order=ORD-1&ch%00arge=x", `ch\x00arge`},
		{"form case-variant", "k", form, "amount=5&Amount=99999999&currency=eur&order=ORD-1", "Amount"},
		{"key with RLO", "k\u202e1", form, refundForm("OP-1", 100).Encode(), "Idempotency-Key"},
		{"key not UTF-8", "k\xff", form, refundForm("OP-1", 100).Encode(), "Idempotency-Key"},
	} {
		h := newHarness(t, sim.ProfileStripeV1)
		r := h.post(t.Context(), c.key, c.contentType, c.body)
		require.NoError(t, r.err, c.name)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", c.name, r.body)
		e := errorOf(t, r)
		require.Equal(t, "invalid_request_error", e.Type, c.name)
		require.Equal(t, c.param, e.Param, "%s: %s", c.name, r.body)
		requirePrintable(t, e.Param)
		requirePrintable(t, e.Message)
		requirePrintable(t, r.header.Get("Idempotency-Key"))
		h.requireCounts(1, 0, 0)
	}

	h := newHarness(t, sim.ProfileStripeV1)
	require.Equal(t, http.StatusOK, h.post(t.Context(), "k", "application/json", okJSON).status, "the body the cases changed is accepted")
	h.requireCounts(1, 1, 0)
}

// TestLookupQueryIsReadStrictly: one operation_id, printable, nothing else.
func TestLookupQueryIsReadStrictly(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	for path, param := range map[string]string{
		"/v1/refunds?operation_id=OP-1&operation_id=OP-2": "operation_id",
		"/v1/refunds?operation_id=OP-1&limit=3":           "limit",
		"/v1/refunds?operation_id=OP-%00":                 "operation_id",
		"/v1/refunds?operation_id=OP-%FF":                 "operation_id",
		"/v1/refunds?operation_id=%zz":                    "",
	} {
		r := h.get(path)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", path, r.body)
		e := errorOf(t, r)
		require.Equal(t, param, e.Param, "%s: %s", path, r.body)
		requirePrintable(t, e.Message)
	}
	h.requireCounts(0, 0, 0)
	require.Equal(t, http.StatusOK, h.get("/v1/refunds?operation_id=OP-1").status)
	h.requireCounts(0, 0, 1)
}

// TestAdminBodiesAreReadStrictly: the /_sim endpoints take one exact object.
func TestAdminBodiesAreReadStrictly(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	for _, body := range []string{
		`null`, ``, `[{"kind":"delay"}]`,
		`{"kind":"reject-validation","Kind":"delay"}`,
		`{"kind":"reject-validation","kind":"delay"}`,
		`{"kind":"reject-validation"} {}`,
		`{"kind":"reject-validation","operation_id":"OP-\u0000"}`,
		"{\"kind\":\"reject-validation\",\"operation_id\":\"OP-\xff\"}",
	} {
		r := h.admin("/_sim/faults", body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		requirePrintable(t, errorOf(t, r).Message)
	}
	require.Empty(t, h.sim.ArmedFaults())
	for _, body := range []string{`{"advance":"1h","Advance":"999h"}`, `{"advance":"1h","advance":"2h"}`, `null`} {
		require.Equal(t, http.StatusBadRequest, h.admin("/_sim/clock", body).status, body)
	}
	require.Equal(t, t0, h.sim.Now())
	require.Equal(t, http.StatusOK, h.admin("/_sim/faults", `{"kind":"reject-validation","operation_id":"OP-1"}`).status)
	require.Len(t, h.sim.ArmedFaults(), 1)
}
