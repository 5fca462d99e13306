package sim

import (
	"fmt"
	"net/http"
	"net/url"
)

// maxListed bounds one lookup answer; beyond it has_more is true.
const maxListed = 100

// handleList serves GET /v1/refunds?operation_id=…: the refunds whose
// metadata operation_id matches, newest first, as Stripe lists. It is counted
// as a lookup of that operation. operation_id is required: the simulator
// offers lookup by our own reference, not a full listing.
//
// The query is read strictly: a malformed query, a parameter other than
// operation_id, operation_id given more than once, or not printable UTF-8
// is a 400 naming the parameter (nothing is counted).
func (s *Simulator) handleList(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeAnswer(w, errorAnswer(invalidRequest(codeParameterInvalid, "", "Invalid query: "+printable(err.Error()))), "", 0, false)
		return
	}
	for name, vs := range q {
		switch {
		case name != "operation_id":
			writeAnswer(w, errorAnswer(invalidRequest(codeParameterUnknown, printable(name), "Received unknown parameter: "+printable(name))), "", 0, false)
			return
		case len(vs) != 1:
			writeAnswer(w, errorAnswer(invalidRequest(codeParameterInvalid, name, fmt.Sprintf("Invalid %s: given %d times.", name, len(vs)))), "", 0, false)
			return
		}
	}
	op := q.Get("operation_id")
	if op == "" || len(op) > maxMetadataValueLen {
		writeAnswer(w, errorAnswer(invalidRequest(codeParameterMissing, "operation_id",
			fmt.Sprintf("Missing or invalid query parameter operation_id (1 to %d bytes).", maxMetadataValueLen))), "", 0, false)
		return
	}
	if e := checkText("operation_id", op, maxMetadataValueLen); e != nil {
		writeAnswer(w, errorAnswer(e), "", 0, false)
		return
	}
	s.mu.Lock()
	s.lookupLocked(op)
	matched := s.refundsByOp[op]
	list := listObject{Object: "list", Data: make([]refundObject, 0, min(len(matched), maxListed)), URL: "/v1/refunds"}
	for i := len(matched) - 1; i >= 0 && len(list.Data) < maxListed; i-- {
		list.Data = append(list.Data, matched[i].object())
	}
	list.HasMore = len(matched) > maxListed
	s.mu.Unlock()
	writeAnswer(w, answer{status: http.StatusOK, body: mustJSON(list)}, "", 0, false)
}

// handleRetrieve serves GET /v1/refunds/{id}, counted as a lookup (of the
// refund's operation when it exists).
func (s *Simulator) handleRetrieve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	ref, ok := s.refundsByID[id]
	op := ""
	if ok {
		op = ref.operationID()
	}
	s.lookupLocked(op)
	var a answer
	if ok {
		a = answer{status: http.StatusOK, body: mustJSON(ref.object())}
	} else {
		a = errorAnswer(&apiError{status: http.StatusNotFound, Type: errTypeInvalidRequest, Code: codeResourceMissing,
			Param: "id", Message: fmt.Sprintf("No such refund: %q", id)})
	}
	s.mu.Unlock()
	writeAnswer(w, a, "", 0, false)
}
