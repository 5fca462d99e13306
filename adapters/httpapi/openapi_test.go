package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi/openapicheck"
)

// The API's contract is docs/openapi.yaml; every answer the API tests
// receive through env.call is checked against it (openapicheck.Response).

// TestOpenAPIDocumentIsValid: docs/openapi.yaml is a valid OpenAPI 3.1
// document (its schemas included).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	v := openapicheck.Validator(t)
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
		ok, _ := openapicheck.Validator(t).ValidateHttpResponse(req, res)
		require.Equal(t, valid, ok, body)
	}
}
