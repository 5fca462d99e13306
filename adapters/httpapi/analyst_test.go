package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// An analyst reads every read, as an auditor does, and may call no command.
func TestAnalystReadsOnly(t *testing.T) {
	t.Parallel()
	const analyst = "analyst-token-0123456789"
	tokens, err := httpapi.ParseTokens(strings.NewReader(tokenFile+"analyst "+analyst+" ana\n"), "tokens")
	require.NoError(t, err)
	e := newEnv(t, func(c *httpapi.Config) { c.Tokens = tokens })
	op, x := e.execute("analyst-1")
	who, ok := tokens.Authenticate(analyst)
	require.True(t, ok)
	require.Equal(t, httpapi.Principal{Role: httpapi.RoleAnalyst, Name: "ana"}, who)
	bearer := []string{"Authorization", "Bearer " + analyst}
	for _, path := range []string{"/v1/escalations", "/v1/operations/" + string(op) + "/events", "/v1/evidence", "/v1/set-aside"} {
		e.must(http.StatusOK, e.call("", "GET", path, nil, bearer...))
	}
	for _, path := range []string{"/v1/executions/" + string(x) + "/resolve", "/v1/operations", "/v1/claims", "/v1/set-aside/release"} {
		r := e.must(http.StatusForbidden, e.call("", "POST", path, `{}`, bearer...))
		require.Equal(t, httpapi.CodeForbidden, r.code(), path)
		require.Contains(t, r.body["error"].(map[string]any)["message"], "role analyst", path)
	}
}
