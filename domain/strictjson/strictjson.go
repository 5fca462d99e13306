// Package strictjson is the one reading of JSON that comes from outside:
// HTTP bodies, transport messages, files the CLI reads, the provider
// simulator's requests. Input is hostile, so it is read by the semantics of
// encoding/json/v2, which refuse what encoding/json (v1) quietly accepts:
//
//   - names match exactly: "Amount_Minor" is not "amount_minor" (v1 folds
//     case, so a case-variant could override a field an upstream check saw);
//   - a duplicate name is refused, at any depth (v1 lets the last one win);
//   - invalid UTF-8 is refused (v1 replaces it with U+FFFD);
//   - members the target type does not have are refused, at any depth,
//     unless the caller allows them (Options.AllowUnknown);
//   - the input must be exactly one JSON object: not null, an array, a
//     string, a number, two values or a value followed by garbage.
//
// Every refusal is an *Error naming the member at fault by its JSON pointer
// (RFC 6901) and by a dotted field path, both escaped so that hostile names
// are safe to log, to answer and to record.
//
// The decoder is github.com/go-json-experiment/json, pinned in go.mod. It is
// the standalone module of encoding/json/v2: in Go 1.26 the standard
// library's copy is behind GOEXPERIMENT=jsonv2, which go.mod cannot switch
// on, and the README's plain `go run` and `go test` must build. The module
// builds without any experiment (its own implementation) and, when the
// experiment is on, aliases the standard library's, so the semantics are the
// same either way (tested both ways; one difference: the embedded-fallback
// tag is `embed` in the module and `inline`/`unknown` in Go 1.26, so no
// caller uses either). When encoding/json/v2 is stable the import path
// changes and nothing else. It is also faster than v1 at unmarshaling
// (BenchmarkDecodeClaimBody).
//
// Free text inside string values (NUL, control and format characters) is
// not judged here: the domain's CheckText does that for each field, so that
// an executor's hostile write can still be recorded as evidence.
package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"opledger/domain"
)

// Problem says what kind of input was refused.
type Problem string

// The problems an *Error reports.
const (
	// ProblemEmpty: no JSON value at all (nothing, or only whitespace).
	ProblemEmpty Problem = "empty"
	// ProblemNotObject: one JSON value, but not an object (null, an array,
	// a string, a number, true or false).
	ProblemNotObject Problem = "not-object"
	// ProblemSyntax: not JSON, truncated, invalid UTF-8, or more than one
	// value (trailing data).
	ProblemSyntax Problem = "syntax"
	// ProblemDuplicate: an object holds the same name twice.
	ProblemDuplicate Problem = "duplicate"
	// ProblemUnknown: a name the target type does not have (names match
	// exactly; a case-variant of a known name is unknown too).
	ProblemUnknown Problem = "unknown"
	// ProblemType: a value of the wrong JSON type or out of range for the
	// field (a string for an integer, 1.5 or 2^70 for an int64).
	ProblemType Problem = "type"
)

// ErrRefused is wrapped by every *Error.
var ErrRefused = errors.New("JSON input refused")

// maxNameInError bounds a hostile name quoted in an error.
const maxNameInError = 2 * domain.MaxIDLength

// Error is a refusal of JSON input.
type Error struct {
	Problem Problem
	// Pointer is the RFC 6901 JSON pointer of the member at fault
	// ("/facts/vip"); empty when the input as a whole is at fault.
	Pointer string
	// Field is the same place as a dotted path ("facts.vip"), empty when
	// the input as a whole is at fault.
	Field string
	// Detail says what is wrong, in words; printable, hostile text escaped.
	Detail string
	// Offset is the byte offset the decoder had reached.
	Offset int64
	cause  error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Detail
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Detail)
}

// Unwrap returns ErrRefused and the decoder's own error.
func (e *Error) Unwrap() []error { return []error{ErrRefused, e.cause} }

// Options tune a decode.
type Options struct {
	// AllowUnknown accepts (and ignores) members the target type does not
	// have, for input whose producer may add fields (a provider's export).
	// Duplicates, syntax and the one-object rule still apply.
	AllowUnknown bool
}

// DecodeObject decodes data, which must be exactly one JSON object, into
// dst (a pointer to a struct or map), by the rules of the package doc.
// A JSON null for a member leaves a pointer field nil (absent).
//
// Accepted input is decoded in one pass (json.Unmarshal, which refuses
// trailing data itself); only refused input is read again, token by token,
// to say precisely what is wrong.
func DecodeObject(data []byte, dst any, opt Options) error {
	if i := bytes.IndexFunc(data, notSpace); i >= 0 && data[i] == '{' {
		err := json.Unmarshal(data, dst, json.RejectUnknownMembers(!opt.AllowUnknown))
		if err == nil {
			return nil
		}
		if e := refusal(data, dst, opt); e != nil {
			return e
		}
		return explain(err)
	}
	if e := refusal(data, dst, opt); e != nil {
		return e
	}
	return &Error{Problem: ProblemSyntax, Detail: "cannot be read as one JSON object"}
}

// notSpace reports whether r is not JSON whitespace.
func notSpace(r rune) bool { return r != ' ' && r != '\t' && r != '\n' && r != '\r' }

// refusal reads data token by token and explains the first rule it breaks,
// or returns nil when it breaks none.
func refusal(data []byte, dst any, opt Options) *Error {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	switch k := dec.PeekKind(); k {
	case '{':
	case 0: // nothing, or not JSON: ReadToken reports which
		_, err := dec.ReadToken()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && len(bytes.TrimSpace(data)) == 0 {
			return &Error{Problem: ProblemEmpty, Detail: "no JSON value: a JSON object is required", cause: err}
		}
		return syntaxError(err)
	default:
		return &Error{Problem: ProblemNotObject, Detail: fmt.Sprintf("must be one JSON object, got JSON %s", kindName(k))}
	}
	if err := json.UnmarshalDecode(dec, dst, json.RejectUnknownMembers(!opt.AllowUnknown)); err != nil {
		return explain(err)
	}
	if k := dec.PeekKind(); k != 0 {
		return &Error{Problem: ProblemSyntax, Offset: dec.InputOffset(),
			Detail: fmt.Sprintf("more than one JSON value: a JSON %s follows the object at byte %d", kindName(k), dec.InputOffset())}
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		e := syntaxError(err)
		e.Detail = "data after the JSON object: " + e.Detail
		return e
	}
	return nil
}

// explain turns a decoder error into an *Error.
func explain(err error) *Error {
	var sem *json.SemanticError
	if errors.As(err, &sem) {
		e := &Error{Pointer: escapePointer(string(sem.JSONPointer)), Field: FieldOf(string(sem.JSONPointer)), Offset: sem.ByteOffset, cause: err}
		if errors.Is(sem.Err, json.ErrUnknownName) {
			e.Problem = ProblemUnknown
			e.Detail = "unknown field"
			if known := caseVariantOf(sem.GoType, string(sem.JSONPointer.LastToken())); known != "" {
				e.Detail = fmt.Sprintf("unknown field (names match exactly: the field is %q)", known)
			}
			return e
		}
		var syn *jsontext.SyntacticError
		if errors.As(sem.Err, &syn) || errors.Is(sem.Err, io.ErrUnexpectedEOF) {
			return syntaxError(err)
		}
		e.Problem = ProblemType
		e.Detail = fmt.Sprintf("must be %s, got JSON %s", goKindName(sem.GoType), kindName(sem.JSONKind))
		if sem.Err != nil {
			e.Detail += ": " + safe(sem.Err.Error())
		}
		return e
	}
	return syntaxError(err)
}

// syntaxError explains an error of the JSON text itself.
func syntaxError(err error) *Error {
	var syn *jsontext.SyntacticError
	if !errors.As(err, &syn) {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return &Error{Problem: ProblemSyntax, Detail: "truncated JSON", cause: err}
		}
		return &Error{Problem: ProblemSyntax, Detail: "cannot be read as JSON: " + safe(err.Error()), cause: err}
	}
	e := &Error{Problem: ProblemSyntax, Pointer: escapePointer(string(syn.JSONPointer)), Field: FieldOf(string(syn.JSONPointer)), Offset: syn.ByteOffset, cause: err}
	switch {
	case errors.Is(syn.Err, jsontext.ErrDuplicateName):
		e.Problem = ProblemDuplicate
		e.Detail = "duplicate field: a name may appear once in an object (names match exactly)"
	case errors.Is(syn.Err, io.ErrUnexpectedEOF):
		e.Detail = fmt.Sprintf("truncated JSON at byte %d", syn.ByteOffset)
	case syn.Err != nil && strings.Contains(syn.Err.Error(), "invalid UTF-8"):
		e.Detail = fmt.Sprintf("invalid UTF-8 at byte %d: JSON text must be UTF-8", syn.ByteOffset)
	default:
		msg := "invalid JSON"
		if syn.Err != nil {
			msg = syn.Err.Error()
		}
		e.Detail = fmt.Sprintf("not valid JSON at byte %d: %s", syn.ByteOffset, safe(msg))
	}
	return e
}

// FieldOf turns a JSON pointer into a dotted field path ("/facts/vip" is
// "facts.vip", "/items/0/id" is "items.0.id"), each name escaped by
// domain.EvidenceText and the whole bounded.
func FieldOf(pointer string) string {
	var parts []string
	for tok := range jsontext.Pointer(pointer).Tokens() {
		parts = append(parts, tok)
	}
	return safe(strings.Join(parts, "."))
}

func escapePointer(p string) string { return safe(p) }

// safe escapes and bounds hostile text quoted in an error.
func safe(s string) string {
	out, _ := domain.EvidenceText(s, maxNameInError)
	return out
}

// caseVariantOf returns the JSON name of a field of struct type t that
// equals name but for case, or "".
func caseVariantOf(t reflect.Type, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != "" && tag != "-" && tag != name && strings.EqualFold(tag, name) {
			return tag
		}
	}
	return ""
}

// kindName names a JSON kind.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "true/false"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// goKindName says what JSON a Go type takes.
func goKindName(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "of another type"
}
