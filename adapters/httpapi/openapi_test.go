package httpapi_test

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

// The API's contract is docs/openapi.yaml. It is validated here with
// pb33f/libopenapi (an OpenAPI 3.1 parser and validator in Go, so CI needs
// no Node), and every answer the API tests receive through env.call is
// checked against the schema of its operation and status.

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

// TestOpenAPIDocumentIsValid: docs/openapi.yaml is a valid OpenAPI 3.1
// document (its schemas included).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	v := openAPIValidator(t)
	valid, errs := v.ValidateDocument()
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	require.True(t, valid, "docs/openapi.yaml:\n%s", strings.Join(msgs, "\n"))
}

// TestResponsesAreCheckedAgainstTheSpec: the check env.call applies has
// teeth — an answer whose body breaks its schema is caught.
func TestResponsesAreCheckedAgainstTheSpec(t *testing.T) {
	req, err := http.NewRequest("GET", "http://127.0.0.1:8080/v1/escalations", nil)
	require.NoError(t, err)
	res := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Request: req}
	for body, valid := range map[string]bool{
		`{"escalations":[]}`:                true,
		`{"escalations":"none"}`:            false,
		`{"escalations":[{"operation":1}]}`: false,
	} {
		res.Body = io.NopCloser(strings.NewReader(body))
		ok, _ := openAPIValidator(t).ValidateHttpResponse(req, res)
		require.Equal(t, valid, ok, body)
	}
}

// checkAgainstSpec fails the test when an answer does not match the
// response schema docs/openapi.yaml gives for its operation and status.
func checkAgainstSpec(t *testing.T, req *http.Request, res *http.Response, raw []byte) {
	t.Helper()
	v := openAPIValidator(t)
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
	// Undocumented routes are probed on purpose (404, 405); TestDocsMatchRoutes
	// checks that every served route is documented.
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
	t.Errorf("%s %s → %d does not match docs/openapi.yaml:\n  %s\nbody: %s", req.Method, req.URL.Path, res.StatusCode, strings.Join(msgs, "\n  "), raw)
}
