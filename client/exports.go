package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// ExportDeliveries executes export downloads at the export-delivery service
// (EXPORT_DELIVERY_URL; provider-sim serves it), as `opledger worker` does:
// POST {BaseURL}/v1/export_deliveries, header Idempotency-Key: the use's own
// key, JSON {"export_id","operation_id","use"}. The reconciler finds a
// delivery by its operation and tells the uses apart by their keys.
//
//	2xx delivery matching the request (key, operation, export, use), delivered   Completed
//	2xx matching, failed                                                         NotApplied
//	2xx pending, another status, unparsable, not matching                        Unknown
//	400 invalid_request_error: refused before delivering                         NotApplied
//	422 idempotency_key_reused, other 4xx                                        Unknown
//	409, 429, 5xx, no answer                                                     Unknown, sent again
//	cancelled mid-request                                                        Unknown
//	connection never established                                                 NotApplied, sent again
type ExportDeliveries struct {
	// BaseURL is the service's address. Required.
	BaseURL string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	Sends
}

// Execute asks for x's delivery and classifies the answer.
func (p ExportDeliveries) Execute(ctx context.Context, x *Execution) Result {
	switch {
	case x.Kind != KindExportDownload:
		return Result{Outcome: NotApplied, Detail: fmt.Sprintf("not sent: ExportDeliveries executes export downloads, not %q", x.Kind)}
	case x.IdempotencyKey == "" || len(x.IdempotencyKey) > maxStripeKey:
		return Result{Outcome: NotApplied, Detail: fmt.Sprintf("not sent: idempotency key must be 1 to %d bytes", maxStripeKey)}
	case x.ExportID == "" || x.Use < 1:
		return Result{Outcome: NotApplied, Detail: "not sent: a delivery names its export and use"}
	}
	body := mustJSON(struct {
		ExportID    string `json:"export_id"`
		OperationID string `json:"operation_id"`
		Use         int    `json:"use"`
	}{x.ExportID, x.OperationID, x.Use})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", x.IdempotencyKey)
	h.Set("Accept", "application/json")
	if p.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.APIKey)
	}
	target := strings.TrimSuffix(p.BaseURL, "/") + "/v1/export_deliveries"
	return p.call(ctx, target, h, body, func(status int, header http.Header, body []byte) sent {
		return classifyDelivery(x, status, header, body)
	})
}

func classifyDelivery(x *Execution, status int, header http.Header, body []byte) sent {
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
		var d struct {
			ID, Status     string
			ExportID       string `json:"export_id"`
			OperationID    string `json:"operation_id"`
			IdempotencyKey string `json:"idempotency_key"`
			Use            int
		}
		switch err := json.Unmarshal(body, &d); {
		case err != nil:
			s.Detail = fmt.Sprintf("HTTP %d with an unparsable body: %v", status, err)
		case d.ID == "" || d.IdempotencyKey != x.IdempotencyKey || d.OperationID != x.OperationID || d.ExportID != x.ExportID || d.Use != x.Use:
			s.Detail = fmt.Sprintf("HTTP %d: delivery %q (key %q, operation %q, export %q, use %d) does not match the request",
				status, d.ID, d.IdempotencyKey, d.OperationID, d.ExportID, d.Use)
		case d.Status == "delivered":
			s.ProviderReference, s.Outcome = d.ID, Completed
			s.Detail = fmt.Sprintf("HTTP %d: delivery %s delivered", status, d.ID)
		case d.Status == "failed":
			s.ProviderReference, s.Outcome = d.ID, NotApplied
			s.Detail = fmt.Sprintf("HTTP %d: delivery %s failed", status, d.ID)
		default:
			s.ProviderReference = d.ID
			s.Detail = fmt.Sprintf("HTTP %d: delivery %s is %q", status, d.ID, d.Status)
		}
	case status == http.StatusBadRequest && env.Error != nil && env.Error.Type == "invalid_request_error":
		s.Outcome, s.Detail = NotApplied, "refused before delivering: "+describe
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		s.retryable, s.Detail = true, "may be sent again: "+describe
	default:
		s.Detail = "unexpected answer: " + describe
	}
	if s.replayed {
		s.Detail += " (replayed)"
	}
	return s
}
