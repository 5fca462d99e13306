package provider

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"opledger/domain"
)

// stripeWire speaks a Stripe-style refunds API (package doc, "Stripe").
type stripeWire struct {
	// referenceKey is the metadata key our operation id is written under
	// (the profile's ReferenceField, or operation_id when it has none).
	referenceKey string
	// lookup: the profile says the provider can be searched by it.
	lookup bool
}

// refundObject is a refund as the provider's API shapes it.
type refundObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Status        string            `json:"status"`
	Metadata      map[string]string `json:"metadata"`
	Created       int64             `json:"created"`
	FailureReason string            `json:"failure_reason"`
}

// errorEnvelope is an error answer.
type errorEnvelope struct {
	Error *struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Error types the classification reads.
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeIdempotency    = "idempotency_error"
)

// Refund statuses of the provider's API (mapped by stripeState).
const (
	statusSucceeded      = "succeeded"
	statusFailed         = "failed"
	statusCanceled       = "canceled"
	statusPending        = "pending"
	statusRequiresAction = "requires_action"
)

// Metadata keys the client writes and reads.
const (
	metaOperationID    = "operation_id"
	metaIdempotencyKey = "idempotency_key"
)

// maxStripeKeyLength is the longest idempotency key Stripe accepts.
const maxStripeKeyLength = 255

func (w stripeWire) validate(req domain.RefundRequest) error {
	if len(req.IdempotencyKey) > maxStripeKeyLength {
		return fmt.Errorf("invalid refund request: idempotency key longer than %d bytes", maxStripeKeyLength)
	}
	return nil
}

// create posts the refund form-encoded with header Idempotency-Key.
func (w stripeWire) create(req domain.RefundRequest) (string, http.Header, []byte) {
	form := url.Values{
		"amount":                               {strconv.FormatInt(req.AmountMinor, 10)},
		"currency":                             {strings.ToLower(req.Currency)},
		"order":                                {req.OrderID},
		"metadata[" + w.referenceKey + "]":     {string(req.OperationID)},
		"metadata[" + metaIdempotencyKey + "]": {string(req.IdempotencyKey)},
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("Idempotency-Key", string(req.IdempotencyKey))
	return "/v1/refunds", h, []byte(form.Encode())
}

func (w stripeWire) lookupPath(op domain.OperationID) string {
	if !w.lookup {
		return ""
	}
	return "/v1/refunds?" + url.Values{w.referenceKey: {string(op)}}.Encode()
}

// readLookup validates a list answer: any failure, a paginated (has_more)
// answer, or a refund of another operation is an error, never an empty
// result.
func (w stripeWire) readLookup(op domain.OperationID, status int, body []byte) ([]domain.ProviderEffect, readVerdict) {
	if status != http.StatusOK {
		return nil, statusVerdict(status, describeStripeError(status, body))
	}
	var list struct {
		Object  string          `json:"object"`
		Data    *[]refundObject `json:"data"` // nil when absent: not a valid answer
		HasMore bool            `json:"has_more"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, readVerdict{err: fmt.Errorf("unparsable lookup answer: %w", err)}
	}
	switch {
	case list.Object != "list" || list.Data == nil:
		return nil, readVerdict{err: fmt.Errorf("lookup answer is not a list (object %q)", list.Object)}
	case list.HasMore:
		return nil, readVerdict{err: errors.New("lookup answer is paginated (has_more): the client reads one page only")}
	}
	effects := make([]domain.ProviderEffect, 0, len(*list.Data))
	for i, obj := range *list.Data {
		e, err := w.effect(op, obj)
		if err != nil {
			return nil, readVerdict{err: fmt.Errorf("lookup answer, refund %d: %w", i, err)}
		}
		effects = append(effects, e)
	}
	return effects, readVerdict{}
}

// effect maps one listed refund. The idempotency key comes from
// metadata[idempotency_key], which create writes (a Stripe refund object
// does not carry its key), so that reconciliation can tell one attempt's
// refund from another's.
func (w stripeWire) effect(op domain.OperationID, obj refundObject) (domain.ProviderEffect, error) {
	switch {
	case obj.Object != "refund" || obj.ID == "":
		return domain.ProviderEffect{}, fmt.Errorf("not a refund object (object %q, id %q)", obj.Object, obj.ID)
	case obj.Metadata[w.referenceKey] != string(op):
		return domain.ProviderEffect{}, fmt.Errorf("refund %s belongs to operation %q, not %q", obj.ID, obj.Metadata[w.referenceKey], op)
	case obj.Amount <= 0 || obj.Currency == "" || obj.Created <= 0:
		return domain.ProviderEffect{}, fmt.Errorf("refund %s: amount %d, currency %q, created %d are not all valid",
			obj.ID, obj.Amount, obj.Currency, obj.Created)
	}
	e := domain.ProviderEffect{
		Reference: obj.ID, OperationID: op, IdempotencyKey: domain.IdempotencyKey(obj.Metadata[metaIdempotencyKey]),
		State: stripeState(obj.Status), AmountMinor: obj.Amount, Currency: obj.Currency,
		CreatedAt: time.Unix(obj.Created, 0).UTC(), Detail: "status " + strconv.Quote(obj.Status),
	}
	if obj.FailureReason != "" {
		e.Detail += ": " + obj.FailureReason
	}
	return e, nil
}

// A Stripe-style API has no retrieve by idempotency key.
func (stripeWire) retrievePath(domain.IdempotencyKey) string { return "" }

func (stripeWire) readRetrieve(domain.IdempotencyKey, int, []byte) (domain.ProviderEffect, bool, readVerdict) {
	return domain.ProviderEffect{}, false, readVerdict{err: domain.ErrReadUnsupported}
}
