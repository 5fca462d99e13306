package provider

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

func TestClassifyResponse(t *testing.T) {
	req := domain.RefundRequest{OperationID: "OP-1", OrderID: "O", AmountMinor: 100, Currency: "EUR", IdempotencyKey: "k"}
	refund := func(status string) string {
		return `{"id":"re_1","object":"refund","amount":100,"currency":"eur","status":"` + status + `","metadata":{"operation_id":"OP-1"}}`
	}
	cases := []struct {
		name      string
		status    int
		replayed  bool
		body      string
		outcome   domain.Outcome
		retryable bool
		reference string
	}{
		{"succeeded", 200, false, refund("succeeded"), domain.Completed, false, "re_1"},
		{"succeeded, replayed", 200, true, refund("succeeded"), domain.Completed, false, "re_1"},
		{"failed refund", 200, false, refund("failed"), domain.NotApplied, false, "re_1"},
		{"canceled refund", 200, false, refund("canceled"), domain.NotApplied, false, "re_1"},
		{"pending refund", 200, false, refund("pending"), domain.Unknown, false, "re_1"},
		{"no status", 200, false, `{"id":"re_1","object":"refund","amount":100,"currency":"eur"}`, domain.Unknown, false, "re_1"},
		{"other amount", 200, false, `{"id":"re_1","object":"refund","amount":99,"currency":"eur","status":"succeeded"}`, domain.Unknown, false, "re_1"},
		{"other operation", 200, false, `{"id":"re_1","object":"refund","amount":100,"currency":"eur","status":"succeeded","metadata":{"operation_id":"OP-2"}}`, domain.Unknown, false, "re_1"},
		{"no id", 200, false, `{"object":"refund","amount":100,"currency":"eur","status":"succeeded"}`, domain.Unknown, false, ""},
		{"garbage 2xx", 201, false, `<html>`, domain.Unknown, false, ""},
		{"validation error", 400, false, `{"error":{"type":"invalid_request_error","code":"parameter_invalid","message":"bad"}}`, domain.NotApplied, false, ""},
		{"replayed validation error", 400, true, `{"error":{"type":"invalid_request_error","message":"bad"}}`, domain.NotApplied, false, ""},
		{"idempotency error", 400, false, `{"error":{"type":"idempotency_error","message":"reused"}}`, domain.Unknown, false, ""},
		{"other 400", 400, false, `{"error":{"type":"card_error","message":"?"}}`, domain.Unknown, false, ""},
		{"unparsable 400", 400, false, `oops`, domain.Unknown, false, ""},
		{"401", 401, false, `{"error":{"type":"invalid_request_error"}}`, domain.Unknown, false, ""},
		{"404", 404, false, ``, domain.Unknown, false, ""},
		{"409", 409, false, `{"error":{"type":"idempotency_error"}}`, domain.Unknown, true, ""},
		{"429", 429, false, ``, domain.Unknown, true, ""},
		{"500", 500, false, `{"error":{"type":"api_error"}}`, domain.Unknown, true, ""},
		{"503 empty", 503, false, ``, domain.Unknown, true, ""},
		{"302", 302, false, ``, domain.Unknown, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.replayed {
				h.Set("Idempotent-Replayed", "true")
			}
			r := stripeWire{referenceKey: metaOperationID, lookup: true}.classify(req, c.status, h, []byte(c.body))
			require.Equal(t, c.outcome, r.outcome, r.detail)
			require.Equal(t, c.retryable, r.retryable, r.detail)
			require.Equal(t, c.reference, r.reference)
			require.Equal(t, c.replayed, r.replayed)
			require.NotEmpty(t, r.detail)
		})
	}
}

func TestClassifyTransportError(t *testing.T) {
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	readErr := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	connected := &sendTrace{}
	connected.gotConn.Store(true)
	written := &sendTrace{}
	written.gotConn.Store(true)
	written.wroteRequest.Store(true)

	cases := []struct {
		name      string
		ctx       context.Context
		err       error
		trace     *sendTrace
		outcome   domain.Outcome
		retryable bool
	}{
		{"dial refused", live, dialErr, &sendTrace{}, domain.NotApplied, true},
		{"dial error, but a connection was traced", live, dialErr, connected, domain.Unknown, true},
		{"no connection traced, not a dial error", live, errors.New("EOF"), &sendTrace{}, domain.Unknown, true},
		{"reset after writing", live, readErr, written, domain.Unknown, true},
		{"timeout after writing", live, context.DeadlineExceeded, written, domain.Unknown, true},
		{"cancelled mid-request", cancelled, context.Canceled, written, domain.Unknown, false},
		{"cancelled while dialing", cancelled, dialErr, &sendTrace{}, domain.NotApplied, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := classifyTransportError(c.ctx, c.err, c.trace)
			require.Equal(t, c.outcome, r.outcome, r.detail)
			require.Equal(t, c.retryable, r.retryable, r.detail)
			require.Zero(t, r.status)
		})
	}
}

func TestConclude(t *testing.T) {
	unknown := sendResult{outcome: domain.Unknown, retryable: true, detail: "HTTP 500"}
	rejected := sendResult{outcome: domain.NotApplied, detail: "rejected"}
	replayedRejection := sendResult{outcome: domain.NotApplied, replayed: true, detail: "rejected (replayed)"}
	dialFailed := sendResult{outcome: domain.NotApplied, retryable: true, detail: "dial"}
	completed := sendResult{outcome: domain.Completed, reference: "re_1", detail: "ok"}
	pending := sendResult{outcome: domain.Unknown, reference: "re_9", detail: "pending"}

	cases := []struct {
		name      string
		sends     []sendResult
		outcome   domain.Outcome
		reference string
	}{
		{"nothing sent", nil, domain.NotApplied, ""},
		{"completed after unknown", []sendResult{unknown, completed}, domain.Completed, "re_1"},
		{"rejected alone", []sendResult{rejected}, domain.NotApplied, ""},
		{"rejected after unknown", []sendResult{unknown, rejected}, domain.Unknown, ""},
		{"replayed rejection after unknown", []sendResult{unknown, replayedRejection}, domain.NotApplied, ""},
		{"dial failures only", []sendResult{dialFailed, dialFailed}, domain.NotApplied, ""},
		{"dial failure after unknown", []sendResult{unknown, dialFailed}, domain.Unknown, ""},
		{"unknown after dial failure", []sendResult{dialFailed, unknown}, domain.Unknown, ""},
		{"reference kept from an earlier send", []sendResult{pending, unknown}, domain.Unknown, "re_9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := conclude(c.sends, "")
			require.Equal(t, c.outcome, res.Outcome, res.Detail)
			require.Equal(t, c.reference, res.ProviderReference)
			require.NotEmpty(t, res.Detail)
		})
	}
}

func TestBackoffIsBoundedAndCapped(t *testing.T) {
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", BackoffMin: 100, BackoffMax: 1000})
	require.NoError(t, err)
	for n := 1; n <= MaxAttemptsLimit; n++ {
		want := min(100<<(n-1), 1000)
		for range 20 {
			d := c.backoff(n)
			require.GreaterOrEqual(t, int64(d), int64(want/2))
			require.LessOrEqual(t, int64(d), int64(want))
		}
	}
}
