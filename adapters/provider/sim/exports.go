package sim

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"opledger/domain/strictjson"
)

// The export-delivery service: the executor of an export download, served
// beside every provider profile at /v1/export_deliveries (one API, the same
// for every profile: it is a service of its own, not the payment
// provider's). A delivery is one download of a generated export, asked for
// under an idempotency key (one key per use of the capability):
//
//	POST /v1/export_deliveries            {"export_id","operation_id","use"}, header Idempotency-Key
//	GET  /v1/export_deliveries?operation_id=OP-…   every delivery of an operation ({"data":[…]})
//	GET  /v1/export_deliveries/by-key/{key}        the delivery made under a key, 404 not_found when none
//
// Under a key the service remembers, for ExportKeyRetention, the delivery
// it committed: a resend with the same parameters is answered with it
// (Idempotent-Replayed: true) and delivers nothing again; other parameters
// under the key are 422 idempotency_key_reused. A request that failed
// without committing (a 5xx before the commit, a validation error) is
// saved as nothing, so a resend executes it again. Deliveries are counted
// per operation and per key in the ledger (Counters.ExportsDelivered,
// Ledger.DeliveriesByKey): what tests assert on.
//
// Faults armed for the operation apply to a delivery as to a refund, for
// the kinds the service models: drop-connection-before-read,
// 5xx-before-commit, reject-validation, lose-response-after-commit,
// 5xx-after-commit and decline (committed as "failed": nothing delivered).
// Other kinds stay armed for the refund API.

// ExportKeyRetention is how long the export-delivery service remembers a
// key (the exports-v1 profile says the same).
const ExportKeyRetention = 24 * time.Hour

// Bounds of a delivery request.
const (
	maxExportIDLen  = 128
	maxExportKeyLen = 255
	// MaxExportUse bounds the use a request may name.
	MaxExportUse = 1000
)

// Delivery statuses of the export-delivery API.
const (
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// ExportDelivery is one delivery the service committed, as its API answers
// it. It is never mutated after creation.
type ExportDelivery struct {
	ID             string `json:"id"`
	ExportID       string `json:"export_id"`
	OperationID    string `json:"operation_id"`
	Use            int    `json:"use"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	Created        int64  `json:"created"` // unix seconds, simulated clock
}

// exportRequest is a delivery request's body.
type exportRequest struct {
	ExportID    string `json:"export_id"`
	OperationID string `json:"operation_id"`
	Use         int    `json:"use"`
}

func (r exportRequest) fingerprint() string {
	return fmt.Sprintf("%q/%q/%d", r.ExportID, r.OperationID, r.Use)
}

// exportKey is what the service remembers under one key.
type exportKey struct {
	fingerprint string
	firstSeen   time.Time
	inProgress  bool
	delivery    *ExportDelivery // committed under the key, once it is
}

// exportFaults are the fault kinds the export-delivery service applies.
var exportFaults = []FaultKind{FaultDropConnectionBeforeRead, Fault5xxBeforeCommit, FaultRejectValidation,
	FaultLoseResponseAfterCommit, Fault5xxAfterCommit, FaultDecline}

func (s *Simulator) exportRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/export_deliveries", s.handleDeliver)
	mux.HandleFunc("GET /v1/export_deliveries", s.handleListDeliveries)
	mux.HandleFunc("GET /v1/export_deliveries/by-key/{key}", s.handleDeliveryByKey)
}

// handleDeliver serves POST /v1/export_deliveries: receive and count,
// arrival faults, validation, the key (replay, conflict, reuse or execute),
// execution faults, commit.
func (s *Simulator) handleDeliver(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, readErr := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var req exportRequest
	var reqErr *apiError
	if readErr != nil {
		reqErr = &apiError{status: http.StatusRequestEntityTooLarge, Code: "request_too_large", Message: "Unreadable or too large request body."}
	} else {
		reqErr = parseExportRequest(r.Header.Get("Content-Type"), body, &req)
	}

	s.mu.Lock()
	s.totals.ExportRequests++
	if req.OperationID != "" {
		s.countersLocked(req.OperationID).ExportRequests++
	}
	var fault Fault
	var hasFault bool
	if readErr == nil {
		fault, hasFault = s.takeFaultOfLocked(stageArrival, req.OperationID, exportFaults)
	}
	s.mu.Unlock()

	if hasFault && fault.Kind == FaultDropConnectionBeforeRead {
		s.log.Info("fault applied", "kind", fault.Kind, "operation_id", req.OperationID, "idempotency_key", key)
		abortConnection(w)
		return
	}
	switch {
	case reqErr != nil:
		writeExportError(w, reqErr, key, false)
		return
	case key == "":
		writeExportError(w, invalidRequest(codeParameterMissing, "Idempotency-Key", "Missing required header: Idempotency-Key."), key, false)
		return
	case checkText("Idempotency-Key", key, maxExportKeyLen) != nil:
		writeExportError(w, checkText("Idempotency-Key", key, maxExportKeyLen), "", false)
		return
	}

	s.mu.Lock()
	now := s.clock.now()
	s.pruneExportKeysLocked(now)
	rec, _ := s.exportKeys.get(key, now)
	switch {
	case rec != nil && rec.fingerprint != req.fingerprint():
		s.mu.Unlock()
		writeExportError(w, &apiError{status: http.StatusUnprocessableEntity, Code: codeIdempotencyKeyReused,
			Message: fmt.Sprintf("Key %q was used for another delivery; use another key for a different request.", key)}, key, false)
		return
	case rec != nil && rec.inProgress:
		s.mu.Unlock()
		writeExportError(w, &apiError{status: http.StatusConflict, Code: codeIdempotencyKeyInUse,
			Message: fmt.Sprintf("A request with key %q is in progress. Try again later.", key)}, key, false)
		return
	case rec != nil && rec.delivery != nil:
		d := *rec.delivery
		s.mu.Unlock()
		writeExportAnswer(w, http.StatusOK, d, key, true)
		return
	case rec != nil:
		rec.inProgress = true // failed before without effect: execute again
	case s.exportKeys.len() >= s.cfg.MaxRememberedKeys:
		s.mu.Unlock()
		writeExportError(w, &apiError{status: http.StatusTooManyRequests, Code: "rate_limit",
			Message: fmt.Sprintf("The service already remembers %d keys; try again later.", s.exportKeys.len())}, key, false)
		return
	default:
		rec = &exportKey{fingerprint: req.fingerprint(), firstSeen: now, inProgress: true}
		s.exportKeys.put(key, rec)
	}
	fault, hasFault = s.takeFaultOfLocked(stageExecution, req.OperationID, exportFaults)
	s.mu.Unlock()
	if hasFault {
		s.log.Info("fault applied", "kind", fault.Kind, "operation_id", req.OperationID, "idempotency_key", key)
	}

	switch fault.Kind {
	case FaultRejectValidation:
		s.endExport(rec, nil)
		writeExportError(w, invalidRequest(codeParameterInvalid, "export_id", "The export cannot be delivered (simulated reject-validation fault); nothing was delivered."), key, false)
		return
	case Fault5xxBeforeCommit:
		s.endExport(rec, nil)
		writeExportError(w, &apiError{status: http.StatusInternalServerError, Code: "api_error",
			Message: "An unexpected error occurred (simulated 5xx-before-commit fault)."}, key, false)
		return
	}
	d := s.commitDelivery(rec, key, req, fault.Kind == FaultDecline)
	switch fault.Kind {
	case FaultLoseResponseAfterCommit:
		abortConnection(w)
	case Fault5xxAfterCommit:
		writeExportError(w, &apiError{status: http.StatusInternalServerError, Code: "api_error",
			Message: "An unexpected error occurred (simulated 5xx-after-commit fault)."}, key, false)
	default:
		writeExportAnswer(w, http.StatusCreated, d, key, false)
	}
}

// parseExportRequest reads a delivery body strictly (domain/strictjson) and
// validates it; nothing is saved for a refused request.
func parseExportRequest(contentType string, body []byte, req *exportRequest) *apiError {
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		return invalidRequest(codeParameterInvalid, "Content-Type", "Send application/json.")
	}
	if err := strictjson.DecodeObject(body, req, strictjson.Options{}); err != nil {
		e := invalidRequest(codeParameterInvalid, "", "Invalid JSON body: "+printable(err.Error()))
		var se *strictjson.Error
		if errors.As(err, &se) {
			e.Param = se.Field
		}
		return e
	}
	switch {
	case req.ExportID == "":
		return invalidRequest(codeParameterMissing, "export_id", "Missing required param: export_id.")
	case req.OperationID == "":
		return invalidRequest(codeParameterMissing, "operation_id", "Missing required param: operation_id.")
	case req.Use < 1 || req.Use > MaxExportUse:
		return invalidRequest(codeParameterInvalid, "use", fmt.Sprintf("Invalid use %d: 1 to %d.", req.Use, MaxExportUse))
	}
	if e := checkText("export_id", req.ExportID, maxExportIDLen); e != nil {
		return e
	}
	return checkText("operation_id", req.OperationID, maxMetadataValueLen)
}

// commitDelivery records the delivery (declined: as "failed", nothing
// delivered), counts it, and saves it under its key.
func (s *Simulator) commitDelivery(rec *exportKey, key string, req exportRequest, declined bool) ExportDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &ExportDelivery{
		ID: fmt.Sprintf("dl_sim%08d", len(s.deliveries)+1), ExportID: req.ExportID, OperationID: req.OperationID, Use: req.Use,
		IdempotencyKey: key, Status: DeliveryDelivered, Created: s.clock.now().Unix(),
	}
	c := s.countersLocked(req.OperationID)
	if declined {
		d.Status = DeliveryFailed
	} else {
		s.totals.ExportsDelivered++
		c.ExportsDelivered++
		s.deliveriesByKey[key]++
	}
	s.deliveries = append(s.deliveries, d)
	s.deliveriesByOp[req.OperationID] = append(s.deliveriesByOp[req.OperationID], d)
	rec.delivery, rec.inProgress = d, false
	return *d
}

func (s *Simulator) endExport(rec *exportKey, d *ExportDelivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec.inProgress = false
	if d != nil {
		rec.delivery = d
	}
}

func (k *exportKey) seenAt() time.Time { return k.firstSeen }
func (k *exportKey) executing() bool   { return k.inProgress }

// pruneExportKeysLocked forgets the keys older than ExportKeyRetention,
// oldest first, unless a request under one is executing (keyStore.forget);
// it runs on every delivery request, so the keys are bounded by the request
// rate over the retention (and by Config.MaxRememberedKeys).
func (s *Simulator) pruneExportKeysLocked(now time.Time) { s.exportKeys.forget(now) }

// handleListDeliveries serves GET /v1/export_deliveries?operation_id=.
func (s *Simulator) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	op := q.Get("operation_id")
	if err != nil || len(q) != 1 || len(q["operation_id"]) != 1 || op == "" {
		writeExportError(w, invalidRequest(codeParameterInvalid, "operation_id", "Ask with exactly one operation_id."), "", false)
		return
	}
	s.mu.Lock()
	s.totals.Lookups++
	s.countersLocked(op).Lookups++
	out := make([]ExportDelivery, 0, len(s.deliveriesByOp[op]))
	for _, d := range s.deliveriesByOp[op] {
		out = append(out, *d)
	}
	s.mu.Unlock()
	writeExportJSON(w, http.StatusOK, struct {
		Data []ExportDelivery `json:"data"`
	}{out}, "", false)
}

// handleDeliveryByKey serves GET /v1/export_deliveries/by-key/{key}: the
// delivery committed under key while the service remembers it, else 404
// not_found.
func (s *Simulator) handleDeliveryByKey(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	s.mu.Lock()
	s.totals.Lookups++
	now := s.clock.now()
	s.pruneExportKeysLocked(now)
	var d *ExportDelivery
	if rec, _ := s.exportKeys.get(key, now); rec != nil && rec.delivery != nil {
		cp := *rec.delivery
		d = &cp
		s.countersLocked(d.OperationID).Lookups++
	}
	s.mu.Unlock()
	if d == nil {
		writeExportError(w, &apiError{status: http.StatusNotFound, Code: "not_found", Message: "No delivery under this key."}, "", false)
		return
	}
	writeExportAnswer(w, http.StatusOK, *d, key, false)
}

// Deliveries returns every delivery committed, in order.
func (s *Simulator) Deliveries() []ExportDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ExportDelivery, 0, len(s.deliveries))
	for _, d := range s.deliveries {
		out = append(out, *d)
	}
	return out
}

func writeExportAnswer(w http.ResponseWriter, status int, d ExportDelivery, key string, replayed bool) {
	writeExportJSON(w, status, d, key, replayed)
}

// writeExportError writes {"error":{"type","code","message","param"}}.
func writeExportError(w http.ResponseWriter, e *apiError, key string, replayed bool) {
	writeExportJSON(w, e.status, struct {
		Error exportError `json:"error"`
	}{exportError{Type: e.Type, Code: e.Code, Message: e.Message, Param: e.Param}}, key, replayed)
}

// exportError is the export-delivery API's error: type invalid_request_error
// is a documented rejection before anything was delivered.
type exportError struct {
	Type    string `json:"type,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

func writeExportJSON(w http.ResponseWriter, status int, v any, key string, replayed bool) {
	body := mustJSON(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
