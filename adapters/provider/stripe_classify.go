package provider

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"opledger/domain"
)

// classify classifies a complete HTTP response to a Stripe-style creation
// request (package doc, "Stripe").
func (w stripeWire) classify(req domain.RefundRequest, status int, header http.Header, body []byte) sendResult {
	r := sendResult{status: status, replayed: header.Get("Idempotent-Replayed") == "true", outcome: domain.Unknown}
	switch {
	case status >= 200 && status <= 299:
		w.classifyRefund(req, body, &r)
	case status == http.StatusBadRequest:
		switch stripeErrorType(body) {
		case errTypeInvalidRequest:
			r.outcome = domain.NotApplied
			r.detail = "rejected before execution: " + describeStripeError(status, body)
		case errTypeIdempotency:
			r.detail = "key already used with other parameters, its first request's fate is not known: " + describeStripeError(status, body)
		default:
			r.detail = "undocumented rejection: " + describeStripeError(status, body)
		}
	case status == http.StatusConflict:
		r.retryable = true
		r.detail = "a request with this key is still in progress: " + describeStripeError(status, body)
	case status == http.StatusTooManyRequests:
		r.retryable = true
		r.detail = "rate limited: " + describeStripeError(status, body)
	case status >= 500:
		r.retryable = true
		r.detail = "provider error, the request may have taken effect: " + describeStripeError(status, body)
	default:
		r.detail = "unexpected answer: " + describeStripeError(status, body)
	}
	if r.replayed {
		r.detail += " (replayed)"
	}
	return r
}

// classifyRefund reads a 2xx body: a refund object that must match the request.
func (w stripeWire) classifyRefund(req domain.RefundRequest, body []byte, r *sendResult) {
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
	if op, ok := obj.Metadata[w.referenceKey]; obj.Amount != req.AmountMinor || !strings.EqualFold(obj.Currency, req.Currency) ||
		(ok && op != string(req.OperationID)) {
		r.detail = fmt.Sprintf("refund %s (%d %s, operation %q) does not match the request (%d %s, operation %q)",
			obj.ID, obj.Amount, obj.Currency, op, req.AmountMinor, req.Currency, req.OperationID)
		return
	}
	switch stripeState(obj.Status) {
	case domain.EffectApplied:
		r.outcome = domain.Completed
		r.detail = fmt.Sprintf("HTTP %d: refund %s succeeded", r.status, obj.ID)
	case domain.EffectNotApplied:
		r.outcome = domain.NotApplied
		r.detail = fmt.Sprintf("HTTP %d: refund %s %s (%s)", r.status, obj.ID, obj.Status, cmp.Or(obj.FailureReason, "no reason given"))
	default:
		r.detail = fmt.Sprintf("HTTP %d: refund %s is %q", r.status, obj.ID, obj.Status)
	}
}

// stripeState maps a Stripe refund status onto the model's effect states:
// the one place the Stripe vocabulary is read.
func stripeState(status string) domain.EffectState {
	switch status {
	case statusSucceeded:
		return domain.EffectApplied
	case statusFailed, statusCanceled:
		return domain.EffectNotApplied
	case statusPending, statusRequiresAction:
		return domain.EffectInProgress
	}
	return domain.EffectUnknown
}

func stripeErrorType(body []byte) string {
	var env errorEnvelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return ""
	}
	return env.Error.Type
}

func describeStripeError(status int, body []byte) string {
	var env errorEnvelope
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return fmt.Sprintf("HTTP %d", status)
	}
	return fmt.Sprintf("HTTP %d %s/%s: %s", status, env.Error.Type, cmp.Or(env.Error.Code, "-"), quote(env.Error.Message))
}
