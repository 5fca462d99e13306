package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// StripeRefunds executes refunds at a Stripe-style refunds API (profiles
// stripe-v1 and stripe-v2, and provider-sim's default), exactly as
// `opledger worker` does, because the reconciler reads the refund back:
// POST {BaseURL}/v1/refunds, header Idempotency-Key: the claim's key, form
// fields amount, currency (lower case), order, metadata[operation_id] and
// metadata[idempotency_key].
//
// Each answer is classified by docs/providers.md's table ("Outcome
// classification", the Stripe-style column):
//
//	2xx refund matching the request, succeeded       Completed
//	2xx refund, failed or canceled                   NotApplied
//	2xx anything else, or not matching the request   Unknown
//	400 invalid_request_error                        NotApplied
//	400 idempotency_error, other 4xx, 3xx            Unknown
//	409, 429, 5xx, no answer                         Unknown, sent again
//	cancelled mid-request (the lease was lost)       Unknown
//	connection never established                     NotApplied, sent again
type StripeRefunds struct {
	// BaseURL is the provider's address (PROVIDER_URL). Required.
	BaseURL string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// ReferenceKey is the metadata key our operation id is written under
	// (default operation_id; a profile file's
	// lookup_by_reference.metadata_key may name another).
	ReferenceKey string
	Sends
}

// maxStripeKey is the longest idempotency key Stripe accepts.
const maxStripeKey = 255

// Execute sends x's refund and classifies the answer.
func (p StripeRefunds) Execute(ctx context.Context, x *Execution) Result {
	switch {
	case x.Kind != KindRefund:
		return Result{Outcome: NotApplied, Detail: fmt.Sprintf("not sent: StripeRefunds executes refunds, not %q", x.Kind)}
	case x.IdempotencyKey == "" || len(x.IdempotencyKey) > maxStripeKey:
		return Result{Outcome: NotApplied, Detail: fmt.Sprintf("not sent: idempotency key must be 1 to %d bytes", maxStripeKey)}
	case x.AmountMinor <= 0 || len(x.Currency) != 3 || x.OrderID == "":
		return Result{Outcome: NotApplied, Detail: "not sent: a refund needs a positive amount, a currency and an order"}
	}
	refKey := cmp.Or(p.ReferenceKey, "operation_id")
	form := url.Values{
		"amount":                    {strconv.FormatInt(x.AmountMinor, 10)},
		"currency":                  {strings.ToLower(x.Currency)},
		"order":                     {x.OrderID},
		"metadata[" + refKey + "]":  {x.OperationID},
		"metadata[idempotency_key]": {x.IdempotencyKey},
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("Idempotency-Key", x.IdempotencyKey)
	h.Set("Accept", "application/json")
	if p.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.APIKey)
	}
	target := strings.TrimSuffix(p.BaseURL, "/") + "/v1/refunds"
	return p.call(ctx, target, h, []byte(form.Encode()), func(status int, header http.Header, body []byte) sent {
		return classifyStripe(x, refKey, status, header, body)
	})
}

// classifyStripe classifies one answer of a Stripe-style API.
func classifyStripe(x *Execution, refKey string, status int, header http.Header, body []byte) sent {
	s := sent{status: status, replayed: header.Get("Idempotent-Replayed") == "true", Result: Result{Outcome: Unknown}}
	var env struct {
		Error *struct{ Type, Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	describe := fmt.Sprintf("HTTP %d", status)
	if env.Error != nil {
		describe = fmt.Sprintf("HTTP %d %s/%s: %s", status, env.Error.Type, cmp.Or(env.Error.Code, "-"), quote(env.Error.Message))
	}
	switch {
	case status >= 200 && status <= 299:
		var r struct {
			ID, Object, Currency, Status string
			Amount                       int64
			Metadata                     map[string]string
			FailureReason                string `json:"failure_reason"`
		}
		switch err := json.Unmarshal(body, &r); {
		case err != nil:
			s.Detail = fmt.Sprintf("HTTP %d with an unparsable body: %v", status, err)
		case r.Object != "refund" || r.ID == "":
			s.Detail = fmt.Sprintf("HTTP %d without a refund object (object %q, id %q)", status, r.Object, r.ID)
		case r.Amount != x.AmountMinor || !strings.EqualFold(r.Currency, x.Currency) || (r.Metadata[refKey] != "" && r.Metadata[refKey] != x.OperationID):
			s.ProviderReference = r.ID
			s.Detail = fmt.Sprintf("refund %s (%d %s, operation %q) does not match the request (%d %s, operation %q)",
				r.ID, r.Amount, r.Currency, r.Metadata[refKey], x.AmountMinor, x.Currency, x.OperationID)
		case r.Status == "succeeded":
			s.ProviderReference, s.Outcome = r.ID, Completed
			s.Detail = fmt.Sprintf("HTTP %d: refund %s succeeded", status, r.ID)
		case r.Status == "failed" || r.Status == "canceled":
			s.ProviderReference, s.Outcome = r.ID, NotApplied
			s.Detail = fmt.Sprintf("HTTP %d: refund %s %s (%s)", status, r.ID, r.Status, cmp.Or(r.FailureReason, "no reason given"))
		default:
			s.ProviderReference = r.ID
			s.Detail = fmt.Sprintf("HTTP %d: refund %s is %q", status, r.ID, r.Status)
		}
	case status == http.StatusBadRequest && env.Error != nil && env.Error.Type == "invalid_request_error":
		s.Outcome, s.Detail = NotApplied, "rejected before execution: "+describe
	case status == http.StatusBadRequest && env.Error != nil && env.Error.Type == "idempotency_error":
		s.Detail = "key already used with other parameters, its first request's fate is not known: " + describe
	case status == http.StatusConflict:
		s.retryable, s.Detail = true, "a request with this key is still in progress: "+describe
	case status == http.StatusTooManyRequests:
		s.retryable, s.Detail = true, "rate limited: "+describe
	case status >= 500:
		s.retryable, s.Detail = true, "provider error, the request may have taken effect: "+describe
	default:
		s.Detail = "unexpected answer: " + describe
	}
	if s.replayed {
		s.Detail += " (replayed)"
	}
	return s
}
