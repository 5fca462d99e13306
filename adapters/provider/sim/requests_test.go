package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

func TestMissingIdempotencyKeyIsRejected(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	r := h.postForm(t.Context(), "", refundForm("OP-1", 100))
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "invalid_request_error", r.errorType())
	h.requireCounts(1, 0, 0)
	require.Equal(t, sim.ResultRejected, h.sim.Ledger().Requests[0].Result)
}

func TestFormAndJSONBodiesAreTheSameRequest(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	form := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.Equal(t, http.StatusOK, form.status)
	jsonBody := `{"amount":100,"currency":"EUR","order":"ORD-8841","metadata":{"operation_id":"OP-1"}}`
	viaJSON := h.post(t.Context(), "k1", "application/json", jsonBody)
	require.Equal(t, http.StatusOK, viaJSON.status)
	require.True(t, viaJSON.replayed(), "same parameters, other encoding")
	require.Equal(t, form.body, viaJSON.body)

	created := h.post(t.Context(), "k2", "application/json; charset=utf-8", jsonBody)
	require.Equal(t, http.StatusOK, created.status)
	require.Equal(t, "eur", created.refund(t)["currency"])
	h.requireCounts(3, 2, 0)
}

func TestInvalidParametersAreRejectedBeforeExecution(t *testing.T) {
	form := func(edit func(url.Values)) (string, string) {
		v := refundForm("OP-1", 100)
		edit(v)
		return "application/x-www-form-urlencoded", v.Encode()
	}
	cases := map[string]struct{ contentType, body, code string }{}
	add := func(name, code string, ct, body string) {
		cases[name] = struct{ contentType, body, code string }{ct, body, code}
	}
	ct, b := form(func(v url.Values) { v.Del("amount") })
	add("missing amount", "parameter_missing", ct, b)
	ct, b = form(func(v url.Values) { v.Set("amount", "0") })
	add("zero amount", "parameter_invalid", ct, b)
	ct, b = form(func(v url.Values) { v.Set("amount", "12.5") })
	add("fractional amount", "parameter_invalid", ct, b)
	ct, b = form(func(v url.Values) { v.Set("currency", "eu") })
	add("bad currency", "parameter_invalid", ct, b)
	ct, b = form(func(v url.Values) { v.Del("order") })
	add("missing order", "parameter_missing", ct, b)
	ct, b = form(func(v url.Values) { v.Set("charge", "ch_1") })
	add("unknown form parameter", "parameter_unknown", ct, b)
	ct, b = form(func(v url.Values) { v.Add("amount", "100") })
	add("repeated parameter", "parameter_invalid", ct, b)
	add("unknown JSON field", "parameter_invalid", "application/json", `{"amount":1,"currency":"eur","order":"o","charge":"x"}`)
	add("string JSON amount", "parameter_invalid", "application/json", `{"amount":"100","currency":"eur","order":"o"}`)
	add("malformed JSON", "parameter_invalid", "application/json", `{"amount":`)
	add("unsupported content type", "parameter_invalid", "text/plain", "amount=100")

	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, sim.ProfileStripeV1)
			r := h.post(t.Context(), "k1", c.contentType, c.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			var e struct {
				Error struct{ Type, Code, Message string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal(r.body, &e))
			require.Equal(t, "invalid_request_error", e.Error.Type)
			require.Equal(t, c.code, e.Error.Code)
			require.NotEmpty(t, e.Error.Message)
			h.requireCounts(1, 0, 0)
		})
	}
}

func TestOversizedBodyIsRejected(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1, func(c *sim.Config) { c.MaxBodyBytes = 128 })
	form := refundForm("OP-1", 100)
	form.Set("order", strings.Repeat("x", 200))
	r := h.postForm(t.Context(), "k1", form)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	h.requireCounts(1, 0, 0)
}

func TestLookups(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	a1 := h.postForm(t.Context(), "refund-OP-1-a1", refundForm("OP-1", 100)).refund(t)
	h.advance(time.Minute)
	a2 := h.postForm(t.Context(), "refund-OP-1-a2", refundForm("OP-1", 100)).refund(t)
	h.postForm(t.Context(), "refund-OP-2-a1", refundForm("OP-2", 300))

	list := h.get("/v1/refunds?operation_id=OP-1")
	require.Equal(t, http.StatusOK, list.status)
	var l struct {
		Object  string           `json:"object"`
		Data    []map[string]any `json:"data"`
		HasMore bool             `json:"has_more"`
	}
	require.NoError(t, json.Unmarshal(list.body, &l))
	require.Equal(t, "list", l.Object)
	require.False(t, l.HasMore)
	require.Len(t, l.Data, 2)
	require.Equal(t, a2["id"], l.Data[0]["id"], "newest first")
	require.Equal(t, a1["id"], l.Data[1]["id"])

	none := h.get("/v1/refunds?operation_id=OP-404")
	require.Equal(t, http.StatusOK, none.status)
	require.JSONEq(t, `{"object":"list","data":[],"has_more":false,"url":"/v1/refunds"}`, string(none.body))

	one := h.get("/v1/refunds/" + a1["id"].(string))
	require.Equal(t, http.StatusOK, one.status)
	require.Equal(t, a1, one.refund(t))
	require.Equal(t, http.StatusNotFound, h.get("/v1/refunds/re_nope").status)
	require.Equal(t, http.StatusBadRequest, h.get("/v1/refunds").status)

	l2 := h.sim.Ledger()
	require.Equal(t, sim.Counters{RequestsReceived: 3, RefundsCreated: 3, Lookups: 4}, l2.Counters)
	require.Equal(t, sim.Counters{RequestsReceived: 2, RefundsCreated: 2, Lookups: 2}, l2.ByOperation["OP-1"])
	require.Equal(t, sim.Counters{Lookups: 1}, l2.ByOperation["OP-404"])
}

func TestLedgerOverHTTPAndExport(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	h.postForm(t.Context(), "refund-OP-1-a1", refundForm("OP-1", 100))
	h.postForm(t.Context(), "refund-OP-1-a1", refundForm("OP-1", 100))
	h.postForm(t.Context(), "refund-OP-2-a1", refundForm("OP-2", 250))

	r := h.get("/_sim/ledger")
	require.Equal(t, http.StatusOK, r.status)
	var overHTTP sim.Ledger
	require.NoError(t, json.Unmarshal(r.body, &overHTTP))
	require.Equal(t, h.sim.Ledger(), overHTTP)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(r.body, &raw))
	require.EqualValues(t, 3, raw["requests_received"])
	require.EqualValues(t, 2, raw["refunds_created"])
	require.EqualValues(t, 0, raw["lookups"])
	require.Contains(t, raw["by_operation"], "OP-2")

	var viaGo bytes.Buffer
	require.NoError(t, h.sim.WriteLedgerExport(&viaGo))
	export := h.get("/_sim/ledger/export")
	require.Equal(t, viaGo.Bytes(), export.body)
	lines := strings.Split(strings.TrimSpace(viaGo.String()), "\n")
	require.Len(t, lines, 2)
	var first sim.ExportedRefund
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, sim.ExportedRefund{
		ID: first.ID, OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", Amount: 100,
		Currency: "eur", Order: "ORD-8841", Status: "succeeded", Created: t0.Unix(),
	}, first)
}

func TestAdminEndpoints(t *testing.T) {
	h := newHarness(t, sim.ProfileStripeV1)
	require.Equal(t, http.StatusBadRequest, h.admin("/_sim/faults", `{"kind":"explode"}`).status)
	require.Equal(t, http.StatusBadRequest, h.admin("/_sim/faults", `{"kind":"delay","duration":"soon"}`).status)
	require.Equal(t, http.StatusOK, h.admin("/_sim/faults", `{"kind":"delay","duration":"2s","operation_id":"OP-9"}`).status)
	require.Equal(t, []sim.Fault{{Kind: sim.FaultDelay, OperationID: "OP-9", Duration: 2 * time.Second}}, h.sim.ArmedFaults())
	require.JSONEq(t, `{"armed":[{"kind":"delay","operation_id":"OP-9","duration":"2s"}]}`, string(h.get("/_sim/faults").body))

	// Hold via HTTP, release via HTTP.
	require.Equal(t, http.StatusOK, h.admin("/_sim/faults", `{"kind":"hold-response"}`).status)
	done := make(chan response, 1)
	go func() { done <- h.postForm(t.Context(), "k1", refundForm("OP-1", 100)) }()
	<-h.sim.Held()
	rel := h.admin("/_sim/faults/release", "")
	require.JSONEq(t, `{"released":1}`, string(rel.body))
	require.Equal(t, http.StatusOK, (<-done).status)

	// The clock over HTTP prunes keys.
	require.Equal(t, http.StatusBadRequest, h.admin("/_sim/clock", `{"advance":"-1h"}`).status)
	adv := h.admin("/_sim/clock", `{"advance":"25h"}`)
	require.Equal(t, http.StatusOK, adv.status)
	require.JSONEq(t, `{"now":"2025-01-03T04:04:05Z"}`, string(adv.body))
	require.JSONEq(t, `{"now":"2025-01-03T04:04:05Z"}`, string(h.get("/_sim/clock").body))
	fresh := h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
	require.False(t, fresh.replayed())
	h.requireCounts(2, 2, 0)
}

func TestConfigValidation(t *testing.T) {
	_, err := sim.New(sim.Config{Profile: "stripe-v3"})
	require.Error(t, err)
	_, err = sim.New(sim.Config{MaxBodyBytes: -1})
	require.Error(t, err)
	p, err := sim.ParseProfile("stripe-v2")
	require.NoError(t, err)
	require.Equal(t, 30*24*time.Hour, p.KeyRetention())
	s, err := sim.New(sim.Config{})
	require.NoError(t, err)
	require.Equal(t, sim.ProfileStripeV1, s.Profile())
}
