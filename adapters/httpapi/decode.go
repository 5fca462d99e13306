package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"opledger/domain/strictjson"
)

// Request bodies are read by domain/strictjson: the semantics of
// encoding/json/v2 (github.com/go-json-experiment/json, its standalone
// module, because Go 1.26 keeps encoding/json/v2 behind GOEXPERIMENT=jsonv2
// and the plain `go build` must work). Names match exactly, a duplicate name
// or invalid UTF-8 is refused, unknown members are refused at any depth, and
// the body must be exactly one JSON object. encoding/json (v1) folded case
// and let the last duplicate win, so a body could carry a value an upstream
// check never saw.
//
// Free text inside string values is judged by the domain (CheckText), which
// names the field, so an executor's hostile write can still be recorded as
// evidence before it is refused.

// CodeRequestDuplicateField: an object of the body holds one name twice
// (names match exactly). The other decoding codes are in reply.go.
const CodeRequestDuplicateField = "request.duplicate-field"

// bodyField is the field an error names when the body as a whole is at
// fault (empty, not an object, not JSON, trailing data).
const bodyField = "body"

// decodeBody reads r's body, at most limit bytes, into dst: exactly one
// JSON object, names matching exactly, no duplicate names, valid UTF-8, no
// unknown fields at any depth. An empty body is refused. Errors are
// *apiError naming the field at fault (its dotted path, or "body"): 413
// request.too-large; 400 request.malformed (not one JSON object, invalid
// JSON or UTF-8), request.duplicate-field, request.unknown-field (a
// case-variant of a field is unknown too) or request.invalid (a value of
// the wrong type).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decodeJSON(w, r, limit, dst, false)
}

// decodeOptionalBody is decodeBody for endpoints whose body may be empty
// (dst is then left as it is). An optional body is empty or one JSON object:
// `null` is refused like any other non-object.
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decodeJSON(w, r, limit, dst, true)
}

// bodyBuffers holds the buffers request bodies are read into: a decoded
// value holds copies of what it took from its body (strictjson's strings
// are its own), so a buffer is reused once the body decoded. One grown past
// maxPooledBody is left to the collector, to bound what the pool holds.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any, optional bool) error {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge, field: bodyField,
				message: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
		}
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, field: bodyField, message: "cannot read the request body", cause: err}
	}
	err := strictjson.DecodeObject(buf.Bytes(), dst, strictjson.Options{})
	if err == nil {
		if buf.Cap() <= maxPooledBody {
			bodyBuffers.Put(buf)
		}
		return nil
	}
	// An error may refer to the body: its buffer is not reused.
	var se *strictjson.Error
	switch {
	case !errors.As(err, &se):
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, field: bodyField, message: "request body cannot be read as JSON", cause: err}
	case se.Problem == strictjson.ProblemEmpty && optional:
		return nil
	}
	return decodeError(se)
}

// decodeError answers a strict decoding refusal.
func decodeError(se *strictjson.Error) *apiError {
	field := se.Field
	if field == "" {
		field = bodyField
	}
	e := &apiError{status: http.StatusBadRequest, field: field, cause: se}
	switch se.Problem {
	case strictjson.ProblemDuplicate:
		e.code = CodeRequestDuplicateField
		e.message = fmt.Sprintf("field %s appears more than once: %s", field, se.Detail)
	case strictjson.ProblemUnknown:
		e.code = CodeRequestUnknownField
		e.message = fmt.Sprintf("field %s: %s; see docs/api.md for the fields this endpoint takes", field, se.Detail)
	case strictjson.ProblemType:
		e.code = CodeRequestInvalid
		e.message = fmt.Sprintf("field %s %s", field, se.Detail)
	case strictjson.ProblemEmpty:
		e.code = CodeRequestMalformed
		e.message = "request body is empty: a JSON object is required"
	default: // not an object, syntax, UTF-8, trailing data
		e.code = CodeRequestMalformed
		if se.Field == "" {
			e.message = "request body " + se.Detail
		} else {
			e.message = fmt.Sprintf("request body, at field %s: %s", field, se.Detail)
		}
	}
	return e
}

// need returns *p, or a 400 naming field when the field was absent (or null).
func need[T any](p *T, field string) (T, error) {
	if p == nil {
		var zero T
		return zero, invalid(field, "field %s is required", field)
	}
	return *p, nil
}
