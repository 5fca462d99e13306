package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// refund is one refund the simulator committed. It is never mutated after
// creation.
type refund struct {
	ID             string
	IdempotencyKey string
	Amount         int64
	Currency       string
	Order          string
	Status         string
	Metadata       map[string]string
	Created        int64 // unix seconds, simulated clock
}

func (r *refund) operationID() string { return r.Metadata["operation_id"] }

// refundObject is a refund on the wire, as Stripe shapes it.
type refundObject struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Order    string            `json:"order"`
	Status   string            `json:"status"`
	Metadata map[string]string `json:"metadata"`
	Created  int64             `json:"created"`
}

func (r *refund) object() refundObject {
	md := make(map[string]string, len(r.Metadata))
	for k, v := range r.Metadata {
		md[k] = v
	}
	return refundObject{
		ID: r.ID, Object: "refund", Amount: r.Amount, Currency: r.Currency, Order: r.Order,
		Status: r.Status, Metadata: md, Created: r.Created,
	}
}

// listObject is a page of refunds on the wire.
type listObject struct {
	Object  string         `json:"object"`
	Data    []refundObject `json:"data"`
	HasMore bool           `json:"has_more"`
	URL     string         `json:"url"`
}

// Error types and codes the simulator answers with (Stripe's vocabulary).
const (
	errTypeInvalidRequest = "invalid_request_error"
	errTypeIdempotency    = "idempotency_error"
	errTypeAPI            = "api_error"
	errTypeRateLimit      = "rate_limit_error"

	codeParameterMissing     = "parameter_missing"
	codeParameterInvalid     = "parameter_invalid"
	codeParameterUnknown     = "parameter_unknown"
	codeIdempotencyKeyInUse  = "idempotency_key_in_use"
	codeIdempotencyKeyReused = "idempotency_key_reused"
	codeResourceMissing      = "resource_missing"
)

// apiError is an error answer: its HTTP status and the body's error object.
type apiError struct {
	status  int
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func (e *apiError) body() []byte {
	return mustJSON(struct {
		Error *apiError `json:"error"`
	}{e})
}

func invalidRequest(code, param, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: errTypeInvalidRequest, Code: code, Param: param, Message: message}
}

// mustJSON encodes values the simulator itself built; they always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("provider simulator: encoding its own response: " + err.Error())
	}
	return b
}

// answer is one HTTP response: saved under a key, or written once.
type answer struct {
	status int
	body   []byte
}

func errorAnswer(e *apiError) answer { return answer{status: e.status, body: e.body()} }

// writeAnswer writes a JSON response with the simulator's standard headers.
func writeAnswer(w http.ResponseWriter, a answer, key string, requestSeq int64, replayed bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(a.body)))
	h.Set("Request-Id", "req_sim_"+strconv.FormatInt(requestSeq, 10))
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body) // the client may be gone; nothing to do about it
}
