package sim

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opledger/domain/strictjson"
)

// meridianDialect is the Meridian refund-requests API (package doc,
// "Meridian"): JSON only, the key in Meridian-Request-Id, an error model of
// its own, a retrieve by request id and no search by merchant reference.
type meridianDialect struct{}

// Meridian's error codes.
const (
	meridianMalformed          = "MALFORMED_REQUEST"
	meridianValidation         = "VALIDATION_FAILED"
	meridianRequestIDReused    = "REQUEST_ID_REUSED"
	meridianInProgress         = "REQUEST_IN_PROGRESS"
	meridianRateLimited        = "RATE_LIMITED"
	meridianTooLarge           = "REQUEST_TOO_LARGE"
	meridianNotFound           = "NOT_FOUND"
	meridianInternal           = "INTERNAL_ERROR"
	meridianServiceUnavailable = "SERVICE_UNAVAILABLE"

	// maxMeridianKey is the longest Meridian-Request-Id taken.
	maxMeridianKey = 200
)

// meridianObject is a refund request on the wire.
type meridianObject struct {
	RefundRequestID   string         `json:"refundRequestId"`
	RequestID         string         `json:"requestId"`
	MerchantReference string         `json:"merchantReference"`
	MerchantOrder     string         `json:"merchantOrder"`
	Amount            meridianAmount `json:"amount"`
	Status            string         `json:"status"` // COMPLETED or DECLINED
	DeclineReason     string         `json:"declineReason,omitempty"`
	CreatedAt         string         `json:"createdAt"` // RFC 3339, simulated clock
}

type meridianAmount struct {
	Value    int64  `json:"value"`
	Currency string `json:"currency"` // upper case
}

// meridianErrorBody is an error on the wire.
type meridianErrorBody struct {
	ErrorCode string `json:"errorCode"`
	Message   string `json:"message"`
	Field     string `json:"field,omitempty"`
}

func meridianStatus(r *refund) string {
	if r.Declined {
		return "DECLINED"
	}
	return "COMPLETED"
}

func meridianRefund(r *refund) meridianObject {
	o := meridianObject{
		RefundRequestID: r.ID, RequestID: r.IdempotencyKey, MerchantReference: r.Operation, MerchantOrder: r.Order,
		Amount: meridianAmount{Value: r.Amount, Currency: strings.ToUpper(r.Currency)}, Status: meridianStatus(r),
		CreatedAt: time.Unix(r.Created, 0).UTC().Format(time.RFC3339),
	}
	if r.Declined {
		o.DeclineReason = declineReason
	}
	return o
}

func (meridianDialect) keyHeader() string { return "Meridian-Request-Id" }

func (meridianDialect) reference(body []byte, _ string) string {
	var m struct {
		MerchantReference string `json:"merchantReference"`
	}
	_ = json.Unmarshal(body, &m) // a body it cannot read names no reference
	return m.MerchantReference
}
func (meridianDialect) replayHeader() string { return "Meridian-Replayed" }
func (meridianDialect) maxKey() int          { return maxMeridianKey }

// parse reads a JSON body strictly (domain/strictjson): exactly one object,
// exact names, no duplicates, no unknown fields, valid UTF-8. Any breach is
// MALFORMED_REQUEST; missing fields are left to validation
// (VALIDATION_FAILED). The merchant reference is kept as metadata under the
// simulator's reference key, so counting and faults match by it.
func (meridianDialect) parse(contentType string, body []byte, referenceKey string) (refundParams, *apiError) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		e := invalidRequest(codeParameterInvalid, "Content-Type", "Send application/json.")
		e.malformed = true
		return refundParams{}, e
	}
	var in struct {
		MerchantReference *string `json:"merchantReference"`
		MerchantOrder     string  `json:"merchantOrder"`
		Amount            *struct {
			Value    *int64 `json:"value"`
			Currency string `json:"currency"`
		} `json:"amount"`
	}
	if err := strictjson.DecodeObject(body, &in, strictjson.Options{}); err != nil {
		e := invalidRequest(codeParameterInvalid, "", "Invalid JSON body: "+printable(err.Error()))
		var se *strictjson.Error
		if errors.As(err, &se) {
			e.Param = se.Field
		}
		e.malformed = true
		return refundParams{}, e
	}
	p := refundParams{Order: in.MerchantOrder}
	if in.MerchantReference != nil {
		p.Metadata = map[string]string{referenceKey: *in.MerchantReference}
	}
	if in.Amount != nil {
		p.Currency = in.Amount.Currency
		if in.Amount.Value != nil {
			p.Amount, p.hasAmount = *in.Amount.Value, true
		}
	}
	if in.MerchantReference == nil || *in.MerchantReference == "" {
		return p, invalidRequest(codeParameterMissing, "merchantReference", "Missing required field: merchantReference.")
	}
	return p, nil
}

// meridianField names a parameter the engine validated by Meridian's field
// name.
func meridianField(param string) string {
	switch {
	case param == "amount":
		return "amount.value"
	case param == "currency":
		return "amount.currency"
	case param == "order":
		return "merchantOrder"
	case param == "metadata" || strings.HasPrefix(param, "metadata["):
		return "merchantReference"
	}
	return param
}

// errorAnswer maps the engine's error onto Meridian's model: 400
// MALFORMED_REQUEST (not read), 422 VALIDATION_FAILED (refused before
// execution), 422 REQUEST_ID_REUSED, 409 REQUEST_IN_PROGRESS, 413, 429,
// 404 NOT_FOUND, 500 INTERNAL_ERROR, 503 SERVICE_UNAVAILABLE.
func (meridianDialect) errorAnswer(e *apiError) answer {
	status, code := e.status, meridianInternal
	switch {
	case e.status == http.StatusRequestEntityTooLarge:
		code = meridianTooLarge
	case e.Type == errTypeIdempotency && e.status == http.StatusConflict:
		code = meridianInProgress
	case e.Type == errTypeIdempotency:
		status, code = http.StatusUnprocessableEntity, meridianRequestIDReused
	case e.Type == errTypeRateLimit:
		code = meridianRateLimited
	case e.status == http.StatusNotFound:
		code = meridianNotFound
	case e.Type == errTypeInvalidRequest && (e.malformed || e.Param == "" || e.Code == codeParameterUnknown ||
		e.Param == "Meridian-Request-Id" || e.Param == "Content-Type"):
		status, code = http.StatusBadRequest, meridianMalformed
	case e.Type == errTypeInvalidRequest:
		status, code = http.StatusUnprocessableEntity, meridianValidation
	case e.status == http.StatusServiceUnavailable:
		code = meridianServiceUnavailable
	}
	field := e.Param // a parse error names Meridian's own field already
	if !e.malformed {
		field = meridianField(e.Param)
	}
	return answer{status: status, body: mustJSON(meridianErrorBody{ErrorCode: code, Message: e.Message, Field: field})}
}

func (meridianDialect) created(r *refund) answer {
	return answer{status: http.StatusCreated, body: mustJSON(meridianRefund(r))}
}

func (meridianDialect) current(r *refund) answer {
	return answer{status: http.StatusOK, body: mustJSON(meridianRefund(r))}
}

func (meridianDialect) refundID(n int) string { return fmt.Sprintf("mrr_%08d", n) }

func (meridianDialect) routes(s *Simulator, mux *http.ServeMux) {
	mux.HandleFunc("POST /v3/refund-requests", s.handleCreate)
	mux.HandleFunc("GET /v3/refund-requests/by-request-id/{key}", s.handleRetrieveByKey)
	mux.HandleFunc("GET /v3/refund-requests/{id}", s.handleRetrieve)
}

// MeridianExportHeader is the first line of a Meridian ledger export (CSV).
var MeridianExportHeader = []string{
	"refund_request_id", "request_id", "merchant_reference", "merchant_order", "amount_value", "currency", "status", "created_at",
}

// export writes the settlement report: CSV, a header line, then one line
// per refund request in creation order.
func (meridianDialect) export(w io.Writer, refunds []refund) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(MeridianExportHeader); err != nil {
		return fmt.Errorf("export ledger: %w", err)
	}
	for i := range refunds {
		r := &refunds[i]
		o := meridianRefund(r)
		if err := cw.Write([]string{o.RefundRequestID, o.RequestID, o.MerchantReference, o.MerchantOrder,
			strconv.FormatInt(o.Amount.Value, 10), o.Amount.Currency, o.Status, o.CreatedAt}); err != nil {
			return fmt.Errorf("export ledger: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("export ledger: %w", err)
	}
	return nil
}

func (meridianDialect) exportContentType() string { return "text/csv" }

// handleRetrieveByKey serves GET /v3/refund-requests/by-request-id/{key}:
// the refund request committed under the key, 404 NOT_FOUND when none is
// (the key never came, its request failed without effect, or it is older
// than the retention), 409 REQUEST_IN_PROGRESS while a request under it is
// executing and nothing is committed yet. Counted as a lookup (of the key's
// operation when the key is known).
func (s *Simulator) handleRetrieveByKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if key == "" || len(key) > maxMeridianKey || checkText("requestId", key, maxMeridianKey) != nil {
		e := invalidRequest(codeParameterInvalid, "requestId", fmt.Sprintf("Invalid request id: 1 to %d printable bytes.", maxMeridianKey))
		e.malformed = true
		s.writeAnswer(w, s.errorAnswer(e), "", 0, false)
		return
	}
	s.mu.Lock()
	now := s.clock.now()
	s.pruneKeysLocked(now)
	rec, _ := s.keys.get(key, now)
	op := ""
	if rec != nil {
		op = rec.operationID
	}
	s.lookupLocked(op)
	var a answer
	switch {
	case rec != nil && rec.refundID != "":
		a = s.dia.current(s.refundsByID[rec.refundID])
	case rec != nil && rec.inProgress:
		a = s.errorAnswer(&apiError{status: http.StatusConflict, Type: errTypeIdempotency, Code: codeIdempotencyKeyInUse,
			Message: fmt.Sprintf("A request with id %q is in progress. Try again later.", key)})
	default:
		a = s.errorAnswer(&apiError{status: http.StatusNotFound, Type: errTypeInvalidRequest, Code: codeResourceMissing,
			Param: "requestId", Message: fmt.Sprintf("No refund request under request id %q.", key)})
	}
	s.mu.Unlock()
	s.writeAnswer(w, a, "", 0, false)
}
