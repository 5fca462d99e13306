package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// decodeBody reads r's body, at most limit bytes, into dst: one JSON object,
// unknown fields refused, nothing after it. An empty body is refused.
// Errors are *apiError naming the field at fault where there is one: 413
// request.too-large, 400 request.malformed, request.unknown-field or
// request.invalid.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decodeJSON(w, r, limit, dst, false)
}

// decodeOptionalBody is decodeBody for endpoints whose body may be empty
// (dst is then left as it is).
func decodeOptionalBody(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	return decodeJSON(w, r, limit, dst, true)
}

func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any, optional bool) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &apiError{status: http.StatusRequestEntityTooLarge, code: CodeRequestTooLarge,
				message: fmt.Sprintf("request body is larger than %d bytes", tooLarge.Limit)}
		}
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "cannot read the request body", cause: err}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "request body is empty: a JSON object is required"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		e := decodeError(err)
		if e.code == CodeRequestUnknownField {
			// encoding/json names only the last key; name the whole path.
			if path := unknownFieldPath(data, reflect.TypeOf(dst)); path != "" {
				e.field = path
				e.message = fmt.Sprintf("unknown field %q: see docs/api.md for the fields this endpoint takes", path)
			}
		}
		return e
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "request body holds more than one JSON value"}
	}
	return nil
}

// decodeError explains a json decoding failure.
func decodeError(err error) *apiError {
	var (
		syntax  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed,
			message: fmt.Sprintf("request body is not valid JSON (at byte %d): %v", syntax.Offset, syntax)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "request body is truncated JSON"}
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "request body must be a JSON object"}
		}
		return invalid(typeErr.Field, "field %s must be %s, got JSON %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	}
	// encoding/json reports unknown fields only in its message.
	if name, found := strings.CutPrefix(err.Error(), "json: unknown field "); found {
		name = strings.Trim(name, `"`)
		return &apiError{status: http.StatusBadRequest, code: CodeRequestUnknownField, field: name,
			message: fmt.Sprintf("unknown field %q: see docs/api.md for the fields this endpoint takes", name)}
	}
	return &apiError{status: http.StatusBadRequest, code: CodeRequestMalformed, message: "request body cannot be read as JSON", cause: err}
}

func jsonKind(t reflect.Type) string {
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
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		return "an array"
	}
	return "of another type"
}

// need returns *p, or a 400 naming field when the field was absent (or null).
func need[T any](p *T, field string) (T, error) {
	if p == nil {
		var zero T
		return zero, invalid(field, "field %s is required", field)
	}
	return *p, nil
}

// unknownFieldPath returns the dotted path of the first field (in sorted
// key order) of the JSON object data that type t does not have, or "".
func unknownFieldPath(data []byte, t reflect.Type) string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	return unknownIn(v, t, "")
}

func unknownIn(v any, t reflect.Type, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	obj, isObj := v.(map[string]any)
	if !isObj || t.Kind() != reflect.Struct {
		return ""
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = t.Field(i).Type
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ft, known := fields[k]
		if !known {
			return prefix + k
		}
		if path := unknownIn(obj[k], ft, prefix+k+"."); path != "" {
			return path
		}
	}
	return ""
}
