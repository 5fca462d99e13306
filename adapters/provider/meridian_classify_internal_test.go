package provider

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

// The Meridian outcome table (package doc), one row per answer shape. The
// two providers' shapes really differ: an answer that would be a documented
// rejection in one shape is undocumented in the other, hence Unknown.
func TestClassifyMeridianResponse(t *testing.T) {
	req := domain.RefundRequest{OperationID: "OP-1", OrderID: "O", AmountMinor: 100, Currency: "EUR", IdempotencyKey: "refund-OP-1-a1"}
	object := func(status, key, ref string, amount string) string {
		return `{"refundRequestId":"mrr_1","requestId":"` + key + `","merchantReference":"` + ref + `","merchantOrder":"O",` +
			`"amount":{"value":` + amount + `,"currency":"EUR"},"status":"` + status + `","createdAt":"2025-01-02T03:04:05Z"}`
	}
	ok := func(status string) string { return object(status, "refund-OP-1-a1", "OP-1", "100") }
	errBody := func(code string) string { return `{"errorCode":"` + code + `","message":"m","field":"amount.value"}` }
	cases := []struct {
		name      string
		status    int
		replayed  bool
		body      string
		outcome   domain.Outcome
		retryable bool
		reference string
	}{
		{"201 completed", 201, false, ok("COMPLETED"), domain.Completed, false, "mrr_1"},
		{"200 completed, replayed", 200, true, ok("COMPLETED"), domain.Completed, false, "mrr_1"},
		{"201 declined", 201, false, ok("DECLINED"), domain.NotApplied, false, "mrr_1"},
		{"202 processing", 202, false, ok("PROCESSING"), domain.Unknown, false, "mrr_1"},
		{"undocumented status", 201, false, ok("ON_HOLD"), domain.Unknown, false, "mrr_1"},
		{"another request id", 201, false, object("COMPLETED", "refund-OP-1-a2", "OP-1", "100"), domain.Unknown, false, "mrr_1"},
		{"another reference", 201, false, object("COMPLETED", "refund-OP-1-a1", "OP-2", "100"), domain.Unknown, false, "mrr_1"},
		{"another amount", 201, false, object("COMPLETED", "refund-OP-1-a1", "OP-1", "99"), domain.Unknown, false, "mrr_1"},
		{"no id", 201, false, `{"status":"COMPLETED"}`, domain.Unknown, false, ""},
		{"a Stripe refund object", 200, false, `{"id":"re_1","object":"refund","amount":100,"currency":"eur","status":"succeeded"}`, domain.Unknown, false, ""},
		{"garbage 2xx", 201, false, `<html>`, domain.Unknown, false, ""},
		{"400 malformed: not read", 400, false, errBody("MALFORMED_REQUEST"), domain.NotApplied, false, ""},
		{"400 other code", 400, false, errBody("SOMETHING"), domain.Unknown, false, ""},
		{"400 in Stripe's shape", 400, false, `{"error":{"type":"invalid_request_error","message":"bad"}}`, domain.Unknown, false, ""},
		{"422 validation: refused before execution", 422, false, errBody("VALIDATION_FAILED"), domain.NotApplied, false, ""},
		{"422 request id reused", 422, false, errBody("REQUEST_ID_REUSED"), domain.Unknown, false, ""},
		{"422 undocumented", 422, false, errBody("NOPE"), domain.Unknown, false, ""},
		{"422 unparsable", 422, false, `oops`, domain.Unknown, false, ""},
		{"409 in progress", 409, false, errBody("REQUEST_IN_PROGRESS"), domain.Unknown, true, ""},
		{"429", 429, false, errBody("RATE_LIMITED"), domain.Unknown, true, ""},
		{"500", 500, false, errBody("INTERNAL_ERROR"), domain.Unknown, true, ""},
		{"503 empty", 503, false, ``, domain.Unknown, true, ""},
		{"401", 401, false, errBody("UNAUTHORIZED"), domain.Unknown, false, ""},
		{"404", 404, false, errBody("NOT_FOUND"), domain.Unknown, false, ""},
		{"302", 302, false, ``, domain.Unknown, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.replayed {
				h.Set(meridianReplayedHeader, "true")
			}
			r := meridianWire{retrieve: true}.classify(req, c.status, h, []byte(c.body))
			require.Equal(t, c.outcome, r.outcome, r.detail)
			require.Equal(t, c.retryable, r.retryable, r.detail)
			require.Equal(t, c.reference, r.reference)
			require.Equal(t, c.replayed, r.replayed)
			require.NotEmpty(t, r.detail)
		})
	}
}

// Meridian's documented rejection is not Stripe's: the Stripe wire reads a
// Meridian 422 as undocumented, Unknown.
func TestStripeWireDoesNotReadMeridianRejections(t *testing.T) {
	req := domain.RefundRequest{OperationID: "OP-1", OrderID: "O", AmountMinor: 100, Currency: "EUR", IdempotencyKey: "k"}
	r := stripeWire{referenceKey: metaOperationID}.classify(req, 422, http.Header{}, []byte(`{"errorCode":"VALIDATION_FAILED"}`))
	require.Equal(t, domain.Unknown, r.outcome)
	r = stripeWire{referenceKey: metaOperationID}.classify(req, 400, http.Header{}, []byte(`{"errorCode":"MALFORMED_REQUEST"}`))
	require.Equal(t, domain.Unknown, r.outcome)
}
