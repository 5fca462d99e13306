// Package openapicheck holds the API's answers to its contract,
// docs/openapi.yaml, in tests: the document is parsed and validated with
// pb33f/libopenapi (an OpenAPI 3.1 parser and validator in Go, so CI needs no
// Node), and Response checks one answer against the response schema of its
// operation and status. Only tests import it.
package openapicheck

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

var (
	once      sync.Once
	validated validator.Validator
	loadErrs  []error
)

// SpecPath is docs/openapi.yaml in the repository this package is built from.
func SpecPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "openapi.yaml")
}

// Validator returns the validator of docs/openapi.yaml, loaded once; the test
// fails when the document cannot be loaded.
func Validator(tb testing.TB) validator.Validator {
	tb.Helper()
	once.Do(func() {
		raw, err := os.ReadFile(SpecPath())
		if err != nil {
			loadErrs = []error{err}
			return
		}
		doc, err := libopenapi.NewDocument(raw)
		if err != nil {
			loadErrs = []error{err}
			return
		}
		validated, loadErrs = validator.NewValidator(doc)
	})
	if len(loadErrs) > 0 {
		tb.Fatalf("docs/openapi.yaml cannot be loaded: %v", loadErrs)
	}
	return validated
}

// Response fails the test (without stopping it) when an answer, whose body
// raw was already read from res, does not match the response schema
// docs/openapi.yaml gives for its operation and status. An undocumented
// route answered with an error (a 404 or 405 probed on purpose) is not
// checked: the route tests see that every served route is documented.
func Response(tb testing.TB, req *http.Request, res *http.Response, raw []byte) {
	tb.Helper()
	v := Validator(tb)
	// The validator matches paths against the document's server URL.
	r := req.Clone(req.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "http", "127.0.0.1:8080", "127.0.0.1:8080"
	r.Body, r.GetBody = nil, nil
	copyRes := *res
	copyRes.Body = io.NopCloser(bytes.NewReader(raw))
	copyRes.Request = r
	valid, errs := v.ValidateHttpResponse(r, &copyRes)
	if valid {
		return
	}
	if len(errs) == 1 && (errs[0].IsPathMissingError() || errs[0].IsOperationMissingError()) && res.StatusCode >= 400 {
		return
	}
	var msgs []string
	for _, e := range errs {
		msg := e.Message + ": " + e.Reason
		for _, se := range e.SchemaValidationErrors {
			msg += "\n    " + se.FieldPath + ": " + se.Reason
		}
		msgs = append(msgs, msg)
	}
	tb.Errorf("%s %s → %d does not match docs/openapi.yaml:\n  %s\nbody: %s", req.Method, req.URL.Path, res.StatusCode, strings.Join(msgs, "\n  "), raw)
}
