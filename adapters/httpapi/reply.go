package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// reply is a handler's successful answer.
type reply struct {
	status int
	body   any
	header http.Header // extra headers, may be nil
}

func ok(body any) reply { return reply{status: http.StatusOK, body: body} }

// replyBuffer is where an answer is encoded: its JSON, then a newline
// (json.Encoder writes json.Marshal's bytes and the newline).
type replyBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// replyBuffers holds the buffers answers are encoded into, for the next
// answer once one is written; one grown past maxPooledReply is left to
// the collector, to bound what the pool holds.
var replyBuffers = sync.Pool{New: func() any {
	b := new(replyBuffer)
	b.enc = json.NewEncoder(&b.buf)
	return b
}}

const maxPooledReply = 64 << 10

// encodeReply is the one JSON encoding of every answer, so that an answer
// rebuilt from the same values is byte for byte the same. It calls write
// with the encoded answer, which write must not keep.
func encodeReply(body any, write func(data []byte)) error {
	b := replyBuffers.Get().(*replyBuffer)
	b.buf.Reset()
	if err := b.enc.Encode(body); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	write(b.buf.Bytes())
	if b.buf.Cap() <= maxPooledReply {
		replyBuffers.Put(b)
	}
	return nil
}

// writeBody writes body's encoding as writeJSON does, or nothing when body
// does not encode.
func writeBody(w http.ResponseWriter, status int, header http.Header, body any) error {
	return encodeReply(body, func(data []byte) { writeJSON(w, status, header, data) })
}

// The values of the headers every answer carries, in canonical form, one
// slice each for every answer: a header's values are replaced or appended
// to (a new slice), never changed in place.
var (
	headerNoStore = []string{"no-store"}
	headerJSON    = []string{"application/json"}
	headerNoSniff = []string{"nosniff"}
)

// writeJSON writes an answer. Every answer is Cache-Control: no-store: an
// operation's state, its evidence, a refusal or a secret is the caller's,
// never a shared cache's or the next person's at the same browser.
func writeJSON(w http.ResponseWriter, status int, header http.Header, data []byte) {
	h := w.Header()
	h["Cache-Control"] = headerNoStore
	for k, vs := range header {
		h[k] = vs
	}
	h["Content-Type"] = headerJSON
	h["X-Content-Type-Options"] = headerNoSniff
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// Error codes of the API's own (the ledger's refusals keep their reason codes).
const (
	CodeRequestInvalid       = "request.invalid"
	CodeRequestMalformed     = "request.malformed"
	CodeRequestUnknownField  = "request.unknown-field"
	CodeRequestTooLarge      = "request.too-large"
	CodeUnauthenticated      = "auth.unauthenticated"
	CodeForbidden            = "auth.forbidden"
	CodeNotFound             = "not-found"
	CodeMethodNotAllowed     = "method.not-allowed"
	CodeIdempotencyKeyReused = "idempotency.key-reused"
	CodeStoreUnavailable     = "store.unavailable"
	CodeContention           = "ledger.contention"
	CodeStreamCorrupt        = "stream.corrupt"
	CodeTestClockDisabled    = "test-clock.disabled"
	CodeNotReady             = "not-ready"
	CodeInternal             = "internal"
)

// apiError is an answer that is not a success.
type apiError struct {
	status  int
	code    string
	message string
	field   string
	// retryAfter, when set, is sent as Retry-After (seconds).
	retryAfter string
	// cause is logged, never sent.
	cause error
}

func (e *apiError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.status, e.code, e.message, e.cause)
	}
	return fmt.Sprintf("%d %s: %s", e.status, e.code, e.message)
}

func (e *apiError) Unwrap() error { return e.cause }

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

func invalid(field, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: CodeRequestInvalid, field: field, message: fmt.Sprintf(format, args...)}
}

func notFound(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, code: code, message: fmt.Sprintf(format, args...)}
}

// classify turns any handler error into the answer it stands for.
//
//   - a refusal keeps its reason as the code: command.invalid is 400,
//     operation.unknown and execution.unknown 404, every other refusal 409
//     (the request was understood; the ledger's state forbids it);
//   - the store unreachable (or the call's outcome unknown) is 503
//     store.unavailable, contention beyond the handler's retries 503
//     ledger.contention, both with Retry-After;
//   - a corrupt stream is 500 stream.corrupt; anything else 500 internal,
//     its cause logged, never sent.
func classify(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var refusal *domain.Refusal
	switch {
	case errors.As(err, &refusal):
		e := &apiError{status: http.StatusConflict, code: string(refusal.Reason), message: refusal.Error()}
		switch refusal.Reason {
		case domain.ReasonCommandInvalid:
			e.status, e.code, e.message, e.field = http.StatusBadRequest, CodeRequestInvalid, refusal.Detail, refusal.Field
		case domain.ReasonOperationUnknown, domain.ReasonExecutionUnknown:
			e.status = http.StatusNotFound
		}
		return e
	case errors.Is(err, eventstore.ErrUnavailable):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeStoreUnavailable, retryAfter: "1", cause: err,
			message: "the event store is unreachable or did not confirm the write; nothing may be assumed about it: retry the same request"}
	case errors.Is(err, ledger.ErrContention):
		return &apiError{status: http.StatusServiceUnavailable, code: CodeContention, retryAfter: "1", cause: err,
			message: "too many concurrent writers on this operation; nothing was written by this request: retry it"}
	case errors.Is(err, ledger.ErrCorruptStream):
		return &apiError{status: http.StatusInternalServerError, code: CodeStreamCorrupt, cause: err,
			message: "the operation's stream cannot be read as a valid history; an operator must look (opledger audit verify)"}
	}
	return &apiError{status: http.StatusInternalServerError, code: CodeInternal, cause: err, message: "internal error; the server log has the cause"}
}

// writeError writes e as JSON.
func writeError(w http.ResponseWriter, e *apiError) {
	var h http.Header
	if e.retryAfter != "" {
		h = http.Header{"Retry-After": {e.retryAfter}}
	}
	if e.status == http.StatusUnauthorized {
		h = http.Header{"Www-Authenticate": {`Bearer realm="opledger"`}}
	}
	if err := writeBody(w, e.status, h, errorBody{Error: errorDetail{Code: e.code, Message: e.message, Field: e.field}}); err != nil {
		writeJSON(w, e.status, h, []byte(`{"error":{"code":"internal","message":"cannot encode the error"}}`+"\n"))
	}
}
