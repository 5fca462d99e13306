package provider

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"opledger/domain"
)

// sendResult is one send, classified (see the table in the package doc).
type sendResult struct {
	outcome   domain.Outcome
	reference string // the provider's refund id, when the answer named one
	status    int    // 0 when no response arrived
	replayed  bool   // Idempotent-Replayed: true
	retryable bool   // resending the same key is sensible after this
	detail    string
}

// classifyResponse classifies a complete HTTP response to a creation request.
func classifyResponse(req domain.RefundRequest, status int, header http.Header, body []byte) sendResult {
	r := sendResult{status: status, replayed: header.Get("Idempotent-Replayed") == "true", outcome: domain.Unknown}
	switch {
	case status >= 200 && status <= 299:
		classifyRefund(req, body, &r)
	case status == http.StatusBadRequest:
		switch errorType(body) {
		case errTypeInvalidRequest:
			r.outcome = domain.NotApplied
			r.detail = "rejected before execution: " + describeError(status, body)
		case errTypeIdempotency:
			r.detail = "key already used with other parameters, its first request's fate is not known: " + describeError(status, body)
		default:
			r.detail = "undocumented rejection: " + describeError(status, body)
		}
	case status == http.StatusConflict:
		r.retryable = true
		r.detail = "a request with this key is still in progress: " + describeError(status, body)
	case status == http.StatusTooManyRequests:
		r.retryable = true
		r.detail = "rate limited: " + describeError(status, body)
	case status >= 500:
		r.retryable = true
		r.detail = "provider error, the request may have taken effect: " + describeError(status, body)
	default:
		r.detail = "unexpected answer: " + describeError(status, body)
	}
	if r.replayed {
		r.detail += " (replayed)"
	}
	return r
}

// classifyRefund reads a 2xx body: a refund object that must match the request.
func classifyRefund(req domain.RefundRequest, body []byte, r *sendResult) {
	var obj refundObject
	if err := json.Unmarshal(body, &obj); err != nil {
		r.detail = fmt.Sprintf("HTTP %d with an unparsable body: %v", r.status, err)
		return
	}
	if obj.Object != "refund" || obj.ID == "" {
		r.detail = fmt.Sprintf("HTTP %d without a refund object (object %q, id %q)", r.status, obj.Object, obj.ID)
		return
	}
	r.reference = obj.ID
	if op, ok := obj.Metadata[metaOperationID]; obj.Amount != req.AmountMinor || !strings.EqualFold(obj.Currency, req.Currency) ||
		(ok && op != string(req.OperationID)) {
		r.detail = fmt.Sprintf("refund %s (%d %s, operation %q) does not match the request (%d %s, operation %q)",
			obj.ID, obj.Amount, obj.Currency, op, req.AmountMinor, req.Currency, req.OperationID)
		return
	}
	switch obj.Status {
	case statusSucceeded:
		r.outcome = domain.Completed
		r.detail = fmt.Sprintf("HTTP %d: refund %s succeeded", r.status, obj.ID)
	case statusFailed, statusCanceled:
		r.outcome = domain.NotApplied
		r.detail = fmt.Sprintf("HTTP %d: refund %s %s (%s)", r.status, obj.ID, obj.Status, cmp.Or(obj.FailureReason, "no reason given"))
	default:
		r.detail = fmt.Sprintf("HTTP %d: refund %s is %q", r.status, obj.ID, obj.Status)
	}
}

// classifyTransportError classifies a send that got no response. ctx is the
// caller's context (not the per-send one).
func classifyTransportError(ctx context.Context, err error, trace *sendTrace) sendResult {
	var opErr *net.OpError
	switch {
	case !trace.gotConn.Load() && errors.As(err, &opErr) && opErr.Op == "dial":
		return sendResult{outcome: domain.NotApplied, retryable: ctx.Err() == nil,
			detail: "connection not established, nothing sent: " + err.Error()}
	case ctx.Err() != nil:
		return sendResult{outcome: domain.Unknown,
			detail: fmt.Sprintf("cancelled mid-request (%s): %v", trace.progress(), err)}
	case errors.Is(err, context.DeadlineExceeded):
		return sendResult{outcome: domain.Unknown, retryable: true,
			detail: fmt.Sprintf("timed out (%s): %v", trace.progress(), err)}
	default:
		return sendResult{outcome: domain.Unknown, retryable: true,
			detail: fmt.Sprintf("connection failed (%s): %v", trace.progress(), err)}
	}
}

func errorType(body []byte) string {
	var env errorEnvelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return ""
	}
	return env.Error.Type
}

// maxDetailMessage bounds how much of a provider's message a detail quotes.
const maxDetailMessage = 200

func describeError(status int, body []byte) string {
	var env errorEnvelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return fmt.Sprintf("HTTP %d", status)
	}
	msg := env.Error.Message
	if len(msg) > maxDetailMessage {
		msg = msg[:maxDetailMessage] + "…"
	}
	return fmt.Sprintf("HTTP %d %s/%s: %q", status, env.Error.Type, cmp.Or(env.Error.Code, "-"), msg)
}
