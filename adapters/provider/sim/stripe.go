package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// stripeDialect is the Stripe-style refunds API (package doc, "Stripe").
type stripeDialect struct{}

// refundObject is a refund on the wire, as Stripe shapes it.
type refundObject struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Order         string            `json:"order"`
	Status        string            `json:"status"`
	FailureReason string            `json:"failure_reason,omitempty"`
	Metadata      map[string]string `json:"metadata"`
	Created       int64             `json:"created"`
}

// stripeStatus is a refund's status in Stripe's words.
func stripeStatus(r *refund) string {
	if r.Declined {
		return "failed"
	}
	return "succeeded"
}

func stripeObject(r *refund) refundObject {
	md := make(map[string]string, len(r.Metadata))
	for k, v := range r.Metadata {
		md[k] = v
	}
	o := refundObject{
		ID: r.ID, Object: "refund", Amount: r.Amount, Currency: r.Currency, Order: r.Order,
		Status: stripeStatus(r), Metadata: md, Created: r.Created,
	}
	if r.Declined {
		o.FailureReason = declineReason
	}
	return o
}

// declineReason is the reason a FaultDecline refund gives.
const declineReason = "declined by the card issuer (simulated decline fault)"

// listObject is a page of refunds on the wire.
type listObject struct {
	Object  string         `json:"object"`
	Data    []refundObject `json:"data"`
	HasMore bool           `json:"has_more"`
	URL     string         `json:"url"`
}

func (stripeDialect) keyHeader() string { return "Idempotency-Key" }

func (stripeDialect) reference(body []byte, referenceKey string) string {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return ""
	}
	return form.Get("metadata[" + referenceKey + "]")
}
func (stripeDialect) replayHeader() string { return "Idempotent-Replayed" }
func (stripeDialect) maxKey() int          { return maxIdempotencyKey }

func (stripeDialect) parse(contentType string, body []byte, _ string) (refundParams, *apiError) {
	return parseParams(contentType, body)
}

func (stripeDialect) errorAnswer(e *apiError) answer {
	return answer{status: e.status, body: e.stripeBody()}
}

func (stripeDialect) created(r *refund) answer {
	return answer{status: http.StatusOK, body: mustJSON(stripeObject(r))}
}

func (d stripeDialect) current(r *refund) answer { return d.created(r) }

func (stripeDialect) refundID(n int) string { return fmt.Sprintf("re_sim%08d", n) }

func (stripeDialect) routes(s *Simulator, mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/refunds", s.handleCreate)
	mux.HandleFunc("GET /v1/refunds", s.handleList)
	mux.HandleFunc("GET /v1/refunds/{id}", s.handleRetrieve)
}

// ExportedRefund is one line of a Stripe-style ledger export (JSON lines).
type ExportedRefund struct {
	ID             string `json:"id"`
	OperationID    string `json:"operation_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Order          string `json:"order"`
	Status         string `json:"status"`  // "succeeded" or "failed"
	Created        int64  `json:"created"` // unix seconds, simulated clock
}

func (stripeDialect) export(w io.Writer, refunds []refund) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range refunds {
		r := &refunds[i]
		if err := enc.Encode(ExportedRefund{
			ID: r.ID, OperationID: r.Operation, IdempotencyKey: r.IdempotencyKey, Amount: r.Amount,
			Currency: r.Currency, Order: r.Order, Status: stripeStatus(r), Created: r.Created,
		}); err != nil {
			return fmt.Errorf("export ledger: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export ledger: %w", err)
	}
	return nil
}

func (stripeDialect) exportContentType() string { return "application/x-ndjson" }

// maxListed bounds one lookup answer; beyond it has_more is true.
const maxListed = 100

// handleList serves GET /v1/refunds?operation_id=… (the query parameter is
// Config.ReferenceKey): the refunds whose metadata under that key matches,
// newest first, as Stripe lists. It is counted as a lookup of that
// operation. The parameter is required: the simulator offers lookup by our
// own reference, not a full listing.
//
// The query is read strictly: a malformed query, another parameter, the
// parameter given more than once, or not printable UTF-8 is a 400 naming
// the parameter (nothing is counted).
func (s *Simulator) handleList(w http.ResponseWriter, r *http.Request) {
	refKey := s.cfg.ReferenceKey
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.writeAnswer(w, s.errorAnswer(invalidRequest(codeParameterInvalid, "", "Invalid query: "+printable(err.Error()))), "", 0, false)
		return
	}
	for name, vs := range q {
		switch {
		case name != refKey:
			s.writeAnswer(w, s.errorAnswer(invalidRequest(codeParameterUnknown, printable(name), "Received unknown parameter: "+printable(name))), "", 0, false)
			return
		case len(vs) != 1:
			s.writeAnswer(w, s.errorAnswer(invalidRequest(codeParameterInvalid, name, fmt.Sprintf("Invalid %s: given %d times.", name, len(vs)))), "", 0, false)
			return
		}
	}
	op := q.Get(refKey)
	if op == "" || len(op) > maxMetadataValueLen {
		s.writeAnswer(w, s.errorAnswer(invalidRequest(codeParameterMissing, refKey,
			fmt.Sprintf("Missing or invalid query parameter %s (1 to %d bytes).", refKey, maxMetadataValueLen))), "", 0, false)
		return
	}
	if e := checkText(refKey, op, maxMetadataValueLen); e != nil {
		s.writeAnswer(w, s.errorAnswer(e), "", 0, false)
		return
	}
	s.mu.Lock()
	s.lookupLocked(op)
	matched := s.refundsByOp[op]
	list := listObject{Object: "list", Data: make([]refundObject, 0, min(len(matched), maxListed)), URL: "/v1/refunds"}
	for i := len(matched) - 1; i >= 0 && len(list.Data) < maxListed; i-- {
		list.Data = append(list.Data, stripeObject(matched[i]))
	}
	list.HasMore = len(matched) > maxListed
	s.mu.Unlock()
	s.writeAnswer(w, answer{status: http.StatusOK, body: mustJSON(list)}, "", 0, false)
}

// handleRetrieve serves GET /v1/refunds/{id}, counted as a lookup (of the
// refund's operation when it exists).
func (s *Simulator) handleRetrieve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	ref, ok := s.refundsByID[id]
	op := ""
	if ok {
		op = ref.Operation
	}
	s.lookupLocked(op)
	var a answer
	if ok {
		a = s.dia.current(ref)
	} else {
		a = s.errorAnswer(&apiError{status: http.StatusNotFound, Type: errTypeInvalidRequest, Code: codeResourceMissing,
			Param: "id", Message: fmt.Sprintf("No such refund: %q", id)})
	}
	s.mu.Unlock()
	s.writeAnswer(w, a, "", 0, false)
}
