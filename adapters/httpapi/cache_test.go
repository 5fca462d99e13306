package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// TestAnswersAreNeverStored: every JSON answer of the API (a read, an
// error, a write) carries Cache-Control: no-store, so no shared cache or
// browser keeps an operation's state, its evidence or a refusal for the next
// person to read.
func TestAnswersAreNeverStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("cache-1")
	for _, r := range []response{
		e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events", nil)),
		e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/evidence", nil)),
		e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/escalations", nil)),
		e.must(http.StatusOK, e.call(httpapi.RoleAuditor, "GET", "/v1/set-aside", nil)),
		e.must(http.StatusNotFound, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/OP-NOPE", nil)),
		e.must(http.StatusUnauthorized, e.call("", "GET", "/v1/evidence", nil)),
		e.must(http.StatusNotFound, e.call(httpapi.RoleAuditor, "GET", "/v1/nowhere", nil)),
	} {
		require.Equal(t, "no-store", r.header.Get("Cache-Control"), "body: %s", r.raw)
	}
}
