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

// APIExports is the export-delivery service's API (the simulator serves it
// beside every provider profile): POST /v1/export_deliveries, JSON bodies,
// Idempotency-Key, lookup by operation_id, retrieve by key. It is the
// executor of export downloads, not a payment provider: a profile file
// cannot name it, and New refuses it (NewExportClient speaks it).
const APIExports = "opledger-exports"

// ExportsV1 is what the export-delivery service documents: keys kept 24 h
// (the simulator's ExportKeyRetention); a request that failed without
// delivering is executed again under its key; every delivery carries our
// operation id and can be listed by it, or retrieved by its key.
var ExportsV1 = domain.ProviderProfile{
	Name: "exports-v1", API: APIExports, KeyRetention: 24 * time.Hour, ReexecutesFailed: true,
	ReferenceField: metaOperationID, RetrieveByKey: true, KeyPolicy: domain.KeyPerAttempt,
}

// ExportClient is the adapter behind domain.ExportDeliverer: it asks the
// export-delivery service to deliver one use of an export download and
// classifies the answer as the refund clients do (the same sends, retries,
// back-off and whole-call conclusion: client.go). Safe for concurrent use.
type ExportClient struct {
	c *Client
}

var _ domain.ExportDeliverer = (*ExportClient)(nil)

// NewExportClient validates cfg (its Profile zero means ExportsV1; it must
// be of APIExports) and returns a client of the export-delivery service.
func NewExportClient(cfg Config) (*ExportClient, error) {
	if cfg.Profile.Name == "" {
		cfg.Profile = ExportsV1
	}
	cfg.setDefaults()
	if cfg.Profile.API != APIExports {
		return nil, fmt.Errorf("export client config: profile %s speaks api %q, not the export-delivery service's %q", cfg.Profile.Name, cfg.Profile.API, APIExports)
	}
	c, err := newClient(cfg, nil, "export-client")
	if err != nil {
		return nil, fmt.Errorf("export client config: %w", err)
	}
	return &ExportClient{c: c}, nil
}

// Profile is the profile the client speaks by.
func (x *ExportClient) Profile() domain.ProviderProfile { return x.c.profile }

// The export-delivery API's shapes.
type (
	exportDeliveryRequest struct {
		ExportID    string `json:"export_id"`
		OperationID string `json:"operation_id"`
		Use         int    `json:"use"`
	}
	exportDeliveryObject struct {
		ID             string `json:"id"`
		ExportID       string `json:"export_id"`
		OperationID    string `json:"operation_id"`
		Use            int    `json:"use"`
		IdempotencyKey string `json:"idempotency_key"`
		Status         string `json:"status"`
		Created        int64  `json:"created"`
	}
	exportErrorEnvelope struct {
		Error *exportAPIError `json:"error"`
	}
	exportAPIError struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Param   string `json:"param"`
	}
)

// Delivery statuses (mapped by deliveryState) and error codes.
const (
	deliveryDelivered    = "delivered"
	deliveryFailed       = "failed"
	deliveryPending      = "pending"
	exportErrNotFound    = "not_found"
	maxExportKeyLength   = 255
	exportKeyHeader      = "Idempotency-Key"
	exportReplayedHeader = "Idempotent-Replayed"
)

// DeliverExport asks the service to deliver req's export once, under the
// use's key, and classifies what happened; it never returns a bare error.
// It sends at most MaxAttempts times, always with req.IdempotencyKey and
// the same body, and starts no send once ctx is done.
//
// | observed | outcome |
// | 2xx, a delivery matching the request (key, operation, export, use), delivered | Completed |
// | 2xx, matching, failed | NotApplied |
// | 2xx, pending or another status, unparsable, or not matching | Unknown |
// | 400 invalid_request_error: refused before delivering | NotApplied |
// | 422 idempotency_key_reused | Unknown |
// | 409 in progress, 429, 5xx, timeout, reset, unreadable | Unknown, resent |
// | cancelled mid-request | Unknown |
// | connection never established | NotApplied, resent |
func (x *ExportClient) DeliverExport(ctx context.Context, req domain.ExportDelivery) domain.EffectResult {
	c := x.c
	switch {
	case req.IdempotencyKey == "" || len(req.IdempotencyKey) > maxExportKeyLength:
		return domain.EffectResult{Outcome: domain.NotApplied, Detail: fmt.Sprintf("not sent: idempotency key must be 1 to %d bytes", maxExportKeyLength)}
	case req.OperationID == "" || req.ExportID == "" || req.Use < 1:
		return domain.EffectResult{Outcome: domain.NotApplied, Detail: "not sent: a delivery names its operation, export and use"}
	}
	body, err := json.Marshal(exportDeliveryRequest{ExportID: req.ExportID, OperationID: string(req.OperationID), Use: req.Use})
	if err != nil { // strings and an integer always encode
		return domain.EffectResult{Outcome: domain.NotApplied, Detail: "not sent: " + err.Error()}
	}
	header := c.baseHeader()
	header.Set("Content-Type", "application/json")
	header.Set(exportKeyHeader, string(req.IdempotencyKey))
	target := c.target("/v1/export_deliveries")
	sends, stop := c.sendAll(ctx, Send{Kind: SendCreate, OperationID: req.OperationID, IdempotencyKey: req.IdempotencyKey}, func(int) sendResult {
		ex := c.exchange(ctx, http.MethodPost, target, body, header)
		if ex.fail != nil {
			return *ex.fail
		}
		return classifyDelivery(req, ex.status, ex.header, ex.body)
	})
	result := conclude(sends, stop)
	c.log.InfoContext(ctx, "export delivery classified", "operation_id", req.OperationID, "use", req.Use,
		"idempotency_key", req.IdempotencyKey, "sends", len(sends), "outcome", result.Outcome,
		"reference", result.ProviderReference, "detail", result.Detail)
	return result
}

// classifyDelivery classifies a complete answer to a delivery request.
func classifyDelivery(req domain.ExportDelivery, status int, header http.Header, body []byte) sendResult {
	r := sendResult{status: status, replayed: header.Get(exportReplayedHeader) == "true", outcome: domain.Unknown}
	var envelope exportErrorEnvelope
	_ = json.Unmarshal(body, &envelope) // an unreadable body has no error
	e := envelope.Error
	switch {
	case status >= 200 && status <= 299:
		var d exportDeliveryObject
		if err := json.Unmarshal(body, &d); err != nil || d.ID == "" {
			r.detail = fmt.Sprintf("HTTP %d without a readable delivery", status)
			break
		}
		r.reference = d.ID
		if d.IdempotencyKey != string(req.IdempotencyKey) || d.OperationID != string(req.OperationID) || d.ExportID != req.ExportID || d.Use != req.Use {
			r.detail = fmt.Sprintf("delivery %s (export %q, operation %q, use %d, key %q) does not match the request", d.ID, d.ExportID, d.OperationID, d.Use, d.IdempotencyKey)
			break
		}
		switch deliveryState(d.Status) {
		case domain.EffectApplied:
			r.outcome, r.detail = domain.Completed, fmt.Sprintf("HTTP %d: delivery %s delivered", status, d.ID)
		case domain.EffectNotApplied:
			r.outcome, r.detail = domain.NotApplied, fmt.Sprintf("HTTP %d: delivery %s failed, nothing delivered", status, d.ID)
		default:
			r.detail = fmt.Sprintf("HTTP %d: delivery %s is %s", status, d.ID, quote(d.Status))
		}
	case status == http.StatusBadRequest && e != nil && e.Type == errTypeInvalidRequest:
		r.outcome, r.detail = domain.NotApplied, "refused before delivering: "+describeExportError(status, e.Code, e.Message)
	case status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		r.retryable, r.detail = true, "the delivery may have taken place: "+describeExportError(status, codeOf(e), messageOf(e))
	default:
		r.detail = "unexpected answer, the delivery's fate is not known: " + describeExportError(status, codeOf(e), messageOf(e))
	}
	if r.replayed {
		r.detail += " (replayed)"
	}
	return r
}

func codeOf(e *exportAPIError) string {
	if e == nil {
		return ""
	}
	return e.Code
}

func messageOf(e *exportAPIError) string {
	if e == nil {
		return ""
	}
	return e.Message
}

func describeExportError(status int, code, msg string) string {
	if code == "" {
		return fmt.Sprintf("HTTP %d", status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", status, code, quote(msg))
}

// deliveryState maps a delivery status onto the model's effect states: the
// one place the export-delivery vocabulary is read.
func deliveryState(status string) domain.EffectState {
	switch status {
	case deliveryDelivered:
		return domain.EffectApplied
	case deliveryFailed:
		return domain.EffectNotApplied
	case deliveryPending:
		return domain.EffectInProgress
	}
	return domain.EffectUnknown
}

func (d exportDeliveryObject) effect() domain.ProviderEffect {
	return domain.ProviderEffect{
		Reference: d.ID, OperationID: domain.OperationID(d.OperationID), IdempotencyKey: domain.IdempotencyKey(d.IdempotencyKey),
		State: deliveryState(d.Status), ExportID: d.ExportID, CreatedAt: time.Unix(d.Created, 0).UTC(),
		Detail: fmt.Sprintf("status %q, use %d", d.Status, d.Use),
	}
}

// LookupByReference returns the deliveries the service holds for op (every
// use's), retried and bounded like the refund clients' reads; any failure
// is an error, never an empty answer.
func (x *ExportClient) LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	if op == "" {
		return nil, errors.New("look up deliveries: empty operation id")
	}
	c := x.c
	var effects []domain.ProviderEffect
	target := c.target("/v1/export_deliveries?" + url.Values{metaOperationID: {string(op)}}.Encode())
	err := c.read(ctx, Send{Kind: SendLookup, OperationID: op}, target, func(status int, body []byte) (string, bool, readVerdict) {
		if status != http.StatusOK {
			return "", false, statusVerdict(status, describeExportError(status, "", ""))
		}
		var page struct {
			Data []exportDeliveryObject `json:"data"`
		}
		if err := json.Unmarshal(body, &page); err != nil || page.Data == nil {
			return "", false, readVerdict{err: fmt.Errorf("unreadable list of deliveries")}
		}
		effects = effects[:0]
		for _, d := range page.Data {
			if d.ID == "" || d.OperationID != string(op) {
				return "", false, readVerdict{err: fmt.Errorf("a delivery %q of operation %q answered for %s", d.ID, d.OperationID, op)}
			}
			effects = append(effects, d.effect())
		}
		return fmt.Sprintf("%d deliveries", len(effects)), len(effects) > 0, readVerdict{}
	})
	if err != nil {
		return nil, fmt.Errorf("look up deliveries of %s: %w", op, err)
	}
	return effects, nil
}

// RetrieveByKey returns the delivery made under key, found = false when the
// service answers, as documented (404 not_found), that it holds none.
func (x *ExportClient) RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	if key == "" {
		return domain.ProviderEffect{}, false, errors.New("retrieve delivery by key: empty idempotency key")
	}
	c := x.c
	var (
		effect domain.ProviderEffect
		found  bool
	)
	target := c.target("/v1/export_deliveries/by-key/" + url.PathEscape(string(key)))
	err := c.read(ctx, Send{Kind: SendRetrieve, IdempotencyKey: key}, target, func(status int, body []byte) (string, bool, readVerdict) {
		var envelope exportErrorEnvelope
		_ = json.Unmarshal(body, &envelope)
		switch {
		case status == http.StatusNotFound && envelope.Error != nil && envelope.Error.Code == exportErrNotFound:
			found = false
			return "none under the key", false, readVerdict{}
		case status != http.StatusOK:
			return "", false, statusVerdict(status, describeExportError(status, codeOf(envelope.Error), messageOf(envelope.Error)))
		}
		var d exportDeliveryObject
		if err := json.Unmarshal(body, &d); err != nil || d.ID == "" {
			return "", false, readVerdict{err: errors.New("unreadable delivery")}
		}
		if d.IdempotencyKey != string(key) {
			return "", false, readVerdict{err: fmt.Errorf("delivery %s was made under key %q, not %q", d.ID, d.IdempotencyKey, key)}
		}
		effect, found = d.effect(), true
		return fmt.Sprintf("%s: %s", d.ID, effect.State), true, readVerdict{}
	})
	if err != nil {
		return domain.ProviderEffect{}, false, fmt.Errorf("retrieve delivery by key %s: %w", key, err)
	}
	return effect, found, nil
}
