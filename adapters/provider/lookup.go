package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"opledger/domain"
)

// LookupRefunds returns the refunds the provider holds under metadata
// operation_id = op (possibly none). It has no side effect, so a failed
// lookup is retried like a send (bounded by MaxAttempts, ctx honoured).
// Any failure is an error, never an empty answer: the caller must read an
// error as "the provider could not tell".
func (c *Client) LookupRefunds(ctx context.Context, op domain.OperationID) ([]domain.ProviderRefund, error) {
	if op == "" {
		return nil, errors.New("look up refunds: empty operation id")
	}
	target := c.refundsURL + "?" + url.Values{metaOperationID: {string(op)}}.Encode()
	header := c.baseHeader()
	var lastErr error
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.wait(ctx, c.backoff(attempt-1)); err != nil {
				return nil, fmt.Errorf("look up refunds of %s: %w (after: %w)", op, err, lastErr)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("look up refunds of %s: %w", op, errors.Join(err, lastErr))
		}
		start := c.cfg.Now()
		x := c.exchange(ctx, http.MethodGet, target, nil, header)
		refunds, retryable, err := readLookup(op, x)
		s := Send{Kind: SendLookup, OperationID: op, Attempt: attempt, Outcome: domain.Completed, StatusCode: x.status,
			Retryable: retryable, Latency: c.cfg.Now().Sub(start), Detail: fmt.Sprintf("%d refunds", len(refunds))}
		if err != nil {
			s.Outcome, s.Detail = domain.Unknown, err.Error()
			if x.fail != nil {
				s.Outcome, s.StatusCode = x.fail.outcome, x.fail.status
			}
		}
		c.report(ctx, s)
		if err == nil {
			return refunds, nil
		}
		lastErr = err
		if !retryable {
			break
		}
	}
	return nil, fmt.Errorf("look up refunds of %s: %w", op, lastErr)
}

// readLookup validates a lookup answer and says whether a failure is worth
// another try.
func readLookup(op domain.OperationID, x exchanged) (refunds []domain.ProviderRefund, retryable bool, err error) {
	if x.fail != nil {
		return nil, x.fail.retryable, errors.New(x.fail.detail)
	}
	if x.status != http.StatusOK {
		retryable = x.status == http.StatusConflict || x.status == http.StatusTooManyRequests || x.status >= 500
		return nil, retryable, errors.New(describeError(x.status, x.body))
	}
	var list struct {
		Object  string          `json:"object"`
		Data    *[]refundObject `json:"data"` // nil when absent: not a valid answer
		HasMore bool            `json:"has_more"`
	}
	if err := json.Unmarshal(x.body, &list); err != nil {
		return nil, false, fmt.Errorf("unparsable lookup answer: %w", err)
	}
	switch {
	case list.Object != "list" || list.Data == nil:
		return nil, false, fmt.Errorf("lookup answer is not a list (object %q)", list.Object)
	case list.HasMore:
		return nil, false, errors.New("lookup answer is paginated (has_more): the client reads one page only")
	}
	refunds = make([]domain.ProviderRefund, 0, len(*list.Data))
	for i, obj := range *list.Data {
		r, err := toProviderRefund(op, obj)
		if err != nil {
			return nil, false, fmt.Errorf("lookup answer, refund %d: %w", i, err)
		}
		refunds = append(refunds, r)
	}
	return refunds, false, nil
}

func toProviderRefund(op domain.OperationID, obj refundObject) (domain.ProviderRefund, error) {
	switch {
	case obj.Object != "refund" || obj.ID == "":
		return domain.ProviderRefund{}, fmt.Errorf("not a refund object (object %q, id %q)", obj.Object, obj.ID)
	case obj.Metadata[metaOperationID] != string(op):
		return domain.ProviderRefund{}, fmt.Errorf("refund %s belongs to operation %q, not %q", obj.ID, obj.Metadata[metaOperationID], op)
	case obj.Amount <= 0 || obj.Currency == "" || obj.Created <= 0:
		return domain.ProviderRefund{}, fmt.Errorf("refund %s: amount %d, currency %q, created %d are not all valid",
			obj.ID, obj.Amount, obj.Currency, obj.Created)
	}
	r := domain.ProviderRefund{
		ID: obj.ID, OperationID: string(op), IdempotencyKey: obj.Metadata[metaIdempotencyKey],
		AmountMinor: obj.Amount, Currency: obj.Currency, CreatedAt: time.Unix(obj.Created, 0).UTC(),
		FailureReason: obj.FailureReason,
	}
	switch obj.Status {
	case statusSucceeded, statusFailed, statusPending:
		r.Status = obj.Status
	case statusCanceled:
		r.Status = statusFailed
		if r.FailureReason == "" {
			r.FailureReason = statusCanceled
		}
	case statusRequiresAction:
		r.Status = statusPending
	default:
		return domain.ProviderRefund{}, fmt.Errorf("refund %s has unknown status %q", obj.ID, obj.Status)
	}
	return r, nil
}
