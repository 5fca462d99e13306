package provider

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"opledger/domain"
)

// meridianWire speaks the Meridian refund-requests API (package doc,
// "Meridian"): JSON bodies, the key in header Meridian-Request-Id, a
// retrieve by that key, and no search by our reference.
type meridianWire struct {
	retrieve bool // the profile says the provider can be asked by key
}

// meridianRequest is a creation body.
type meridianRequest struct {
	MerchantReference string         `json:"merchantReference"`
	MerchantOrder     string         `json:"merchantOrder"`
	Amount            meridianAmount `json:"amount"`
}

type meridianAmount struct {
	Value    int64  `json:"value"`
	Currency string `json:"currency"`
}

// meridianRefund is a refund request as the API answers it.
type meridianRefund struct {
	RefundRequestID   string         `json:"refundRequestId"`
	RequestID         string         `json:"requestId"`
	MerchantReference string         `json:"merchantReference"`
	MerchantOrder     string         `json:"merchantOrder"`
	Amount            meridianAmount `json:"amount"`
	Status            string         `json:"status"`
	DeclineReason     string         `json:"declineReason"`
	CreatedAt         string         `json:"createdAt"` // RFC 3339
}

// meridianError is an error answer.
type meridianError struct {
	ErrorCode string `json:"errorCode"`
	Message   string `json:"message"`
	Field     string `json:"field"`
}

// Meridian's documented error codes and statuses.
const (
	meridianMalformed       = "MALFORMED_REQUEST"   // 400: not read, nothing executed
	meridianValidation      = "VALIDATION_FAILED"   // 422: refused before execution
	meridianRequestIDReused = "REQUEST_ID_REUSED"   // 422: the key was used with other parameters
	meridianInProgress      = "REQUEST_IN_PROGRESS" // 409
	meridianNotFound        = "NOT_FOUND"           // 404 on a retrieve: nothing under the key

	meridianCompleted  = "COMPLETED"
	meridianDeclined   = "DECLINED"
	meridianProcessing = "PROCESSING"

	meridianKeyHeader      = "Meridian-Request-Id"
	meridianReplayedHeader = "Meridian-Replayed"
	// maxMeridianKeyLength is the longest request id Meridian takes.
	maxMeridianKeyLength = 200
)

func (meridianWire) validate(req domain.RefundRequest) error {
	if len(req.IdempotencyKey) > maxMeridianKeyLength {
		return fmt.Errorf("invalid refund request: idempotency key longer than %d bytes (Meridian's request id limit)", maxMeridianKeyLength)
	}
	return nil
}

func (meridianWire) create(req domain.RefundRequest) (string, http.Header, []byte) {
	body, err := json.Marshal(meridianRequest{
		MerchantReference: string(req.OperationID), MerchantOrder: req.OrderID,
		Amount: meridianAmount{Value: req.AmountMinor, Currency: strings.ToUpper(req.Currency)},
	})
	if err != nil { // strings and an integer always encode
		panic("provider: encode a Meridian request: " + err.Error())
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(meridianKeyHeader, string(req.IdempotencyKey))
	return "/v3/refund-requests", h, body
}

// classify classifies a complete response to a creation request.
func (w meridianWire) classify(req domain.RefundRequest, status int, header http.Header, body []byte) sendResult {
	r := sendResult{status: status, replayed: header.Get(meridianReplayedHeader) == "true", outcome: domain.Unknown}
	code := meridianErrorOf(body).ErrorCode
	switch {
	case status >= 200 && status <= 299:
		w.classifyRefund(req, body, &r)
	case status == http.StatusBadRequest && code == meridianMalformed:
		r.outcome = domain.NotApplied
		r.detail = "not read, nothing executed: " + describeMeridianError(status, body)
	case status == http.StatusUnprocessableEntity && code == meridianValidation:
		r.outcome = domain.NotApplied
		r.detail = "refused before execution: " + describeMeridianError(status, body)
	case status == http.StatusUnprocessableEntity && code == meridianRequestIDReused:
		r.detail = "request id already used with other parameters, its first request's fate is not known: " + describeMeridianError(status, body)
	case status == http.StatusConflict:
		r.retryable = true
		r.detail = "a request with this id is still in progress: " + describeMeridianError(status, body)
	case status == http.StatusTooManyRequests:
		r.retryable = true
		r.detail = "rate limited: " + describeMeridianError(status, body)
	case status >= 500:
		r.retryable = true
		r.detail = "provider error, the request may have taken effect: " + describeMeridianError(status, body)
	default:
		r.detail = "unexpected answer: " + describeMeridianError(status, body)
	}
	if r.replayed {
		r.detail += " (replayed)"
	}
	return r
}

func (w meridianWire) classifyRefund(req domain.RefundRequest, body []byte, r *sendResult) {
	var obj meridianRefund
	if err := json.Unmarshal(body, &obj); err != nil {
		r.detail = fmt.Sprintf("HTTP %d with an unparsable body: %v", r.status, err)
		return
	}
	if obj.RefundRequestID == "" {
		r.detail = fmt.Sprintf("HTTP %d without a refund request (no refundRequestId)", r.status)
		return
	}
	r.reference = obj.RefundRequestID
	if obj.RequestID != string(req.IdempotencyKey) || obj.MerchantReference != string(req.OperationID) ||
		obj.Amount.Value != req.AmountMinor || !strings.EqualFold(obj.Amount.Currency, req.Currency) {
		r.detail = fmt.Sprintf("refund request %s (%d %s, reference %q, request id %q) does not match the request (%d %s, reference %q, request id %q)",
			obj.RefundRequestID, obj.Amount.Value, obj.Amount.Currency, obj.MerchantReference, obj.RequestID,
			req.AmountMinor, req.Currency, req.OperationID, req.IdempotencyKey)
		return
	}
	switch meridianState(obj.Status) {
	case domain.EffectApplied:
		r.outcome = domain.Completed
		r.detail = fmt.Sprintf("HTTP %d: refund request %s completed", r.status, obj.RefundRequestID)
	case domain.EffectNotApplied:
		r.outcome = domain.NotApplied
		r.detail = fmt.Sprintf("HTTP %d: refund request %s declined (%s)", r.status, obj.RefundRequestID, cmp.Or(obj.DeclineReason, "no reason given"))
	default:
		r.detail = fmt.Sprintf("HTTP %d: refund request %s is %q", r.status, obj.RefundRequestID, obj.Status)
	}
}

// meridianState maps a Meridian status onto the model's effect states: the
// one place the Meridian vocabulary is read.
func meridianState(status string) domain.EffectState {
	switch status {
	case meridianCompleted:
		return domain.EffectApplied
	case meridianDeclined:
		return domain.EffectNotApplied
	case meridianProcessing:
		return domain.EffectInProgress
	}
	return domain.EffectUnknown
}

// Meridian has no search by merchant reference.
func (meridianWire) lookupPath(domain.OperationID) string { return "" }

func (meridianWire) readLookup(domain.OperationID, int, []byte) ([]domain.ProviderEffect, readVerdict) {
	return nil, readVerdict{err: domain.ErrReadUnsupported}
}

func (w meridianWire) retrievePath(key domain.IdempotencyKey) string {
	if !w.retrieve {
		return ""
	}
	return "/v3/refund-requests/by-request-id/" + url.PathEscape(string(key))
}

// readRetrieve reads a retrieve by key: 200 with the refund request made
// under key, or 404 NOT_FOUND when none was committed under it. Any other
// answer, a 404 without that code (a proxy's page, a wrong base URL)
// included, is an error: only the documented answer means "none".
func (w meridianWire) readRetrieve(key domain.IdempotencyKey, status int, body []byte) (domain.ProviderEffect, bool, readVerdict) {
	switch {
	case status == http.StatusNotFound && meridianErrorOf(body).ErrorCode == meridianNotFound:
		return domain.ProviderEffect{}, false, readVerdict{}
	case status != http.StatusOK:
		return domain.ProviderEffect{}, false, statusVerdict(status, describeMeridianError(status, body))
	}
	var obj meridianRefund
	if err := json.Unmarshal(body, &obj); err != nil {
		return domain.ProviderEffect{}, false, readVerdict{err: fmt.Errorf("unparsable retrieve answer: %w", err)}
	}
	created, err := time.Parse(time.RFC3339, obj.CreatedAt)
	switch {
	case obj.RefundRequestID == "":
		return domain.ProviderEffect{}, false, readVerdict{err: errors.New("retrieve answer without a refundRequestId")}
	case obj.RequestID != string(key):
		return domain.ProviderEffect{}, false, readVerdict{err: fmt.Errorf("refund request %s was made under request id %q, not %q", obj.RefundRequestID, obj.RequestID, key)}
	case obj.Amount.Value <= 0 || obj.Amount.Currency == "" || err != nil:
		return domain.ProviderEffect{}, false, readVerdict{err: fmt.Errorf("refund request %s: amount %d, currency %q, createdAt %q are not all valid",
			obj.RefundRequestID, obj.Amount.Value, obj.Amount.Currency, obj.CreatedAt)}
	}
	e := domain.ProviderEffect{
		Reference: obj.RefundRequestID, OperationID: domain.OperationID(obj.MerchantReference), IdempotencyKey: key,
		State: meridianState(obj.Status), AmountMinor: obj.Amount.Value, Currency: obj.Amount.Currency,
		CreatedAt: created.UTC(), Detail: "status " + fmt.Sprintf("%q", obj.Status),
	}
	if obj.DeclineReason != "" {
		e.Detail += ": " + obj.DeclineReason
	}
	return e, true, readVerdict{}
}

func meridianErrorOf(body []byte) meridianError {
	var e meridianError
	_ = json.Unmarshal(body, &e) // an unreadable body has no code
	return e
}

func describeMeridianError(status int, body []byte) string {
	e := meridianErrorOf(body)
	if e.ErrorCode == "" {
		return fmt.Sprintf("HTTP %d", status)
	}
	s := fmt.Sprintf("HTTP %d %s", status, e.ErrorCode)
	if e.Field != "" {
		s += " field " + quote(e.Field)
	}
	return s + ": " + quote(e.Message)
}
