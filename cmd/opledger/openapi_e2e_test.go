package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"
)

// Every answer the end-to-end tests get from a real `opledger serve` is
// checked against docs/openapi.yaml, as the API's own tests check theirs
// (adapters/httpapi/openapi_test.go): the document is the contract a worker
// in any language is written against.

var (
	specOnce      sync.Once
	specValidator validator.Validator
	specErr       []error
)

func openAPIValidator(t *testing.T) validator.Validator {
	t.Helper()
	specOnce.Do(func() {
		raw, err := os.ReadFile("../../docs/openapi.yaml")
		if err != nil {
			specErr = []error{err}
			return
		}
		doc, err := libopenapi.NewDocument(raw)
		if err != nil {
			specErr = []error{err}
			return
		}
		specValidator, specErr = validator.NewValidator(doc)
	})
	require.Empty(t, specErr, "docs/openapi.yaml cannot be loaded")
	return specValidator
}

// checkAgainstSpec fails the test when an answer does not match the
// response schema docs/openapi.yaml gives for its operation and status.
func checkAgainstSpec(t *testing.T, req *http.Request, res *http.Response, raw []byte) {
	t.Helper()
	v := openAPIValidator(t)
	r := req.Clone(req.Context()) // the validator matches paths against the document's server URL
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
		return // an undocumented route probed on purpose
	}
	var msgs []string
	for _, e := range errs {
		msg := e.Message + ": " + e.Reason
		for _, se := range e.SchemaValidationErrors {
			msg += "\n    " + se.FieldPath + ": " + se.Reason
		}
		msgs = append(msgs, msg)
	}
	t.Errorf("%s %s → %d does not match docs/openapi.yaml:\n  %s\nbody: %s", req.Method, req.URL.Path, res.StatusCode, strings.Join(msgs, "\n  "), raw)
}
