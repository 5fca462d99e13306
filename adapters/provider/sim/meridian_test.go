package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

// The Meridian refund-requests API as the simulator serves it: its own
// shapes, its error model, retrieve by request id, no search.

const meridianBody = `{"merchantReference":"OP-1","merchantOrder":"ORD-8841","amount":{"value":100,"currency":"EUR"}}`

func (h *harness) meridianPost(key, contentType, body string) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodPost, h.srv.URL+"/v3/refund-requests", bytes.NewBufferString(body))
	require.NoError(h.t, err)
	req.GetBody = nil
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.Header.Set("Meridian-Request-Id", key)
	}
	return do(req)
}

type meridianErr struct{ ErrorCode, Message, Field string }

func meridianErrorOf(t *testing.T, r response) meridianErr {
	t.Helper()
	var e meridianErr
	require.NoError(t, json.Unmarshal(r.body, &e), "%s", r.body)
	return e
}

func TestMeridianCreateAndReplay(t *testing.T) {
	h := newHarness(t, sim.ProfileMeridian)
	first := h.meridianPost("k1", "application/json", meridianBody)
	require.Equal(t, http.StatusCreated, first.status, "%s", first.body)
	obj := first.refund(t)
	require.Equal(t, "mrr_00000001", obj["refundRequestId"])
	require.Equal(t, "k1", obj["requestId"])
	require.Equal(t, "OP-1", obj["merchantReference"])
	require.Equal(t, "COMPLETED", obj["status"])
	require.Equal(t, map[string]any{"value": 100.0, "currency": "EUR"}, obj["amount"])
	require.Equal(t, t0.Format(time.RFC3339), obj["createdAt"])
	require.Equal(t, "k1", first.header.Get("Meridian-Request-Id"))
	require.Empty(t, first.header.Get("Meridian-Replayed"))

	again := h.meridianPost("k1", "application/json", meridianBody)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Meridian-Replayed"))
	require.Equal(t, "mrr_00000001", again.refund(t)["refundRequestId"])
	h.requireCounts(2, 1, 0)
	require.Equal(t, sim.Counters{RequestsReceived: 2, RefundsCreated: 1}, h.sim.Ledger().ByOperation["OP-1"])
}

func TestMeridianErrorModel(t *testing.T) {
	for _, c := range []struct {
		name, key, contentType, body string
		status                       int
		code, field                  string
	}{
		{"no request id", "", "application/json", meridianBody, 400, "MALFORMED_REQUEST", "Meridian-Request-Id"},
		{"form body", "k", "application/x-www-form-urlencoded", "amount=5", 400, "MALFORMED_REQUEST", "Content-Type"},
		{"unknown field", "k", "application/json", `{"merchantReference":"OP-1","merchantOrder":"O","amount":{"value":1,"currency":"EUR"},"metadata":{}}`, 400, "MALFORMED_REQUEST", "metadata"},
		{"duplicate field", "k", "application/json", `{"merchantReference":"OP-1","merchantReference":"OP-2","merchantOrder":"O","amount":{"value":1,"currency":"EUR"}}`, 400, "MALFORMED_REQUEST", "merchantReference"},
		{"not JSON", "k", "application/json", `amount=5`, 400, "MALFORMED_REQUEST", ""},
		{"no reference", "k", "application/json", `{"merchantOrder":"O","amount":{"value":1,"currency":"EUR"}}`, 422, "VALIDATION_FAILED", "merchantReference"},
		{"no amount", "k", "application/json", `{"merchantReference":"OP-1","merchantOrder":"O"}`, 422, "VALIDATION_FAILED", "amount.value"},
		{"zero amount", "k", "application/json", `{"merchantReference":"OP-1","merchantOrder":"O","amount":{"value":0,"currency":"EUR"}}`, 422, "VALIDATION_FAILED", "amount.value"},
		{"bad currency", "k", "application/json", `{"merchantReference":"OP-1","merchantOrder":"O","amount":{"value":1,"currency":"EU"}}`, 422, "VALIDATION_FAILED", "amount.currency"},
		{"no order", "k", "application/json", `{"merchantReference":"OP-1","amount":{"value":1,"currency":"EUR"}}`, 422, "VALIDATION_FAILED", "merchantOrder"},
		{"control in reference", "k", "application/json", `{"merchantReference":"OP-\u001b1","merchantOrder":"O","amount":{"value":1,"currency":"EUR"}}`, 422, "VALIDATION_FAILED", "merchantReference"},
	} {
		h := newHarness(t, sim.ProfileMeridian)
		r := h.meridianPost(c.key, c.contentType, c.body)
		require.Equal(t, c.status, r.status, "%s: %s", c.name, r.body)
		e := meridianErrorOf(t, r)
		require.Equal(t, c.code, e.ErrorCode, c.name)
		require.Equal(t, c.field, e.Field, "%s: %s", c.name, r.body)
		requirePrintable(t, e.Message)
		h.requireCounts(1, 0, 0)
	}

	h := newHarness(t, sim.ProfileMeridian)
	require.Equal(t, http.StatusCreated, h.meridianPost("k", "application/json", meridianBody).status)
	reused := h.meridianPost("k", "application/json", strings.Replace(meridianBody, `"value":100`, `"value":101`, 1))
	require.Equal(t, http.StatusUnprocessableEntity, reused.status)
	require.Equal(t, "REQUEST_ID_REUSED", meridianErrorOf(t, reused).ErrorCode)

	h.arm(sim.Fault{Kind: sim.Fault5xxBeforeCommit})
	failed := h.meridianPost("k2", "application/json", meridianBody)
	require.Equal(t, http.StatusInternalServerError, failed.status)
	require.Equal(t, "INTERNAL_ERROR", meridianErrorOf(t, failed).ErrorCode)
	require.Equal(t, http.StatusCreated, h.meridianPost("k2", "application/json", meridianBody).status,
		"a request that failed without effect is executed again under its id")
	h.requireCounts(4, 2, 0)
}

func TestMeridianHoldIsInProgressAndRetrievable(t *testing.T) {
	h := newHarness(t, sim.ProfileMeridian)
	h.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	done := make(chan response, 1)
	go func() { done <- h.meridianPost("k1", "application/json", meridianBody) }()
	<-h.sim.Held()
	conflict := h.meridianPost("k1", "application/json", meridianBody)
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Equal(t, "REQUEST_IN_PROGRESS", meridianErrorOf(t, conflict).ErrorCode)
	held := h.get("/v3/refund-requests/by-request-id/k1")
	require.Equal(t, http.StatusOK, held.status, "the refund is committed while its answer is held: %s", held.body)
	require.Equal(t, "COMPLETED", held.refund(t)["status"])
	h.sim.Release()
	require.Equal(t, http.StatusCreated, (<-done).status)
	h.requireCounts(2, 1, 1)
}

func TestMeridianReads(t *testing.T) {
	h := newHarness(t, sim.ProfileMeridian)
	created := h.meridianPost("k1", "application/json", meridianBody).refund(t)

	byKey := h.get("/v3/refund-requests/by-request-id/k1")
	require.Equal(t, http.StatusOK, byKey.status)
	require.Equal(t, created["refundRequestId"], byKey.refund(t)["refundRequestId"])
	byID := h.get("/v3/refund-requests/" + created["refundRequestId"].(string))
	require.Equal(t, http.StatusOK, byID.status)

	missing := h.get("/v3/refund-requests/by-request-id/k9")
	require.Equal(t, http.StatusNotFound, missing.status)
	require.Equal(t, "NOT_FOUND", meridianErrorOf(t, missing).ErrorCode)
	bad := h.get("/v3/refund-requests/by-request-id/k%00")
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "MALFORMED_REQUEST", meridianErrorOf(t, bad).ErrorCode)

	// No search by the merchant's reference, and none of Stripe's routes.
	for _, path := range []string{"/v3/refund-requests?merchantReference=OP-1", "/v1/refunds?operation_id=OP-1"} {
		r := h.get(path)
		require.Contains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, r.status, path)
	}
	require.Equal(t, 3, h.sim.Ledger().Lookups, "by key, by id, the missing key; not the malformed or absent routes")

	// The key is kept 7 days of simulated time.
	h.advance(7*24*time.Hour - time.Second)
	require.Equal(t, http.StatusOK, h.get("/v3/refund-requests/by-request-id/k1").status)
	h.advance(time.Second)
	require.Equal(t, http.StatusNotFound, h.get("/v3/refund-requests/by-request-id/k1").status)
	require.Equal(t, http.StatusCreated, h.meridianPost("k1", "application/json", meridianBody).status, "a pruned id is new")
}

func TestDeclineFault(t *testing.T) {
	for _, c := range []struct {
		profile sim.Profile
		status  string
	}{{sim.ProfileStripeV1, "failed"}, {sim.ProfileStripeV2, "failed"}, {sim.ProfileMeridian, "DECLINED"}} {
		h := newHarness(t, c.profile)
		h.arm(sim.Fault{Kind: sim.FaultDecline})
		var r response
		if c.profile == sim.ProfileMeridian {
			r = h.meridianPost("k1", "application/json", meridianBody)
			require.Equal(t, http.StatusCreated, r.status)
		} else {
			r = h.postForm(t.Context(), "k1", refundForm("OP-1", 100))
			require.Equal(t, http.StatusOK, r.status)
		}
		require.Equal(t, c.status, r.refund(t)["status"], c.profile)
		l := h.sim.Ledger()
		require.Equal(t, sim.Counters{RequestsReceived: 1, RefundsDeclined: 1}, l.Counters, c.profile)
		require.Equal(t, sim.ResultDeclined, l.Requests[0].Result)
		var export bytes.Buffer
		require.NoError(t, h.sim.WriteLedgerExport(&export))
		require.Contains(t, export.String(), c.status, "the export shows the declined refund")
	}
}

func TestMeridianExportOverHTTP(t *testing.T) {
	h := newHarness(t, sim.ProfileMeridian)
	require.Equal(t, http.StatusCreated, h.meridianPost("k1", "application/json", meridianBody).status)
	r := h.get("/_sim/ledger/export")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "text/csv", r.header.Get("Content-Type"))
	require.Equal(t, strings.Join(sim.MeridianExportHeader, ",")+"\nmrr_00000001,k1,OP-1,ORD-8841,100,EUR,COMPLETED,"+t0.Format(time.RFC3339)+"\n", string(r.body))
}

func TestConfigFor(t *testing.T) {
	p, err := sim.ParseProfile("meridian")
	require.NoError(t, err)
	require.Equal(t, 7*24*time.Hour, p.KeyRetention())
	_, err = sim.ParseProfile("adyen")
	require.ErrorContains(t, err, "meridian")
}
