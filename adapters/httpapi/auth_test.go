package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// endpoints lists every authenticated endpoint with the roles allowed.
var endpoints = []struct {
	method, path string
	allowed      []httpapi.Role
}{
	{"POST", "/v1/operations", []httpapi.Role{httpapi.RoleAgent}},
	{"POST", "/v1/operations/OP-1/decisions", []httpapi.Role{httpapi.RoleAgent}},
	{"POST", "/v1/claims", []httpapi.Role{httpapi.RoleWorker}},
	{"POST", "/v1/executions/EXE-1.1/lease", []httpapi.Role{httpapi.RoleWorker}},
	{"POST", "/v1/executions/EXE-1.1/outcome", []httpapi.Role{httpapi.RoleWorker}},
	{"POST", "/v1/executions/EXE-1.1/resolve", []httpapi.Role{httpapi.RoleOperator}},
	{"POST", "/v1/capabilities/CAP-1.1/revoke", []httpapi.Role{httpapi.RoleOperator}},
	{"POST", "/v1/test-clock", []httpapi.Role{httpapi.RoleOperator}},
	{"GET", "/v1/escalations", httpapi.Readers},
	{"GET", "/v1/operations/OP-1", httpapi.Readers},
	{"GET", "/v1/operations/OP-1/events", httpapi.Readers},
	{"GET", "/v1/evidence", httpapi.Readers},
	{"GET", "/v1/set-aside", httpapi.Readers},
	{"GET", "/v1/feed", []httpapi.Role{httpapi.RoleAnalyst, httpapi.RoleSubscriber}},
}

// TestEveryRoleIsDeniedWhatItMayNotDo: no or an unknown token is 401 on
// every endpoint; a known token of a role not allowed is 403 and changes
// nothing; an allowed role gets past authorization.
func TestEveryRoleIsDeniedWhatItMayNotDo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, ep := range endpoints {
		name := ep.method + " " + ep.path
		var body any
		if ep.method == "POST" {
			body = `{}`
		}
		r := e.must(http.StatusUnauthorized, e.call("", ep.method, ep.path, body))
		require.Equal(t, httpapi.CodeUnauthenticated, r.code(), name)
		require.NotEmpty(t, r.header.Get("WWW-Authenticate"), name)
		for _, auth := range []string{"Bearer not-a-known-token-at-all", "Basic YWdlbnQ6eA==", "Bearer", "agent-token-0123456789"} {
			r := e.must(http.StatusUnauthorized, e.call("", ep.method, ep.path, body, "Authorization", auth))
			require.Equal(t, httpapi.CodeUnauthenticated, r.code(), name)
		}
		for _, role := range httpapi.Roles {
			if tokenOf[role] == "" {
				continue // the analyst: analyst_test.go has its own token file
			}
			r := e.call(role, ep.method, ep.path, body)
			if slices.Contains(ep.allowed, role) {
				require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, r.status, "%s as %s: %s", name, role, r.raw)
				continue
			}
			require.Equal(t, http.StatusForbidden, r.status, "%s as %s: %s", name, role, r.raw)
			require.Equal(t, httpapi.CodeForbidden, r.code())
			require.Contains(t, r.body["error"].(map[string]any)["message"], string(role))
		}
	}
	// Nothing a refused request asked for happened.
	recs, err := e.store.ReadAll(t.Context(), nil, 10)
	require.NoError(t, err)
	require.Empty(t, recs)

	// Health, readiness and metrics need no token.
	e.must(http.StatusOK, e.call("", "GET", "/healthz", nil))
	e.must(http.StatusOK, e.call("", "GET", "/readyz", nil))
	e.must(http.StatusOK, e.call("", "GET", "/metrics", nil))
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	tokens, err := httpapi.ParseTokens(strings.NewReader(tokenFile), "tokens")
	require.NoError(t, err)
	require.Equal(t, 5, tokens.Len())
	who, found := tokens.Authenticate("operator-token-0123456789")
	require.True(t, found)
	require.Equal(t, httpapi.Principal{Role: httpapi.RoleOperator, Name: "olga"}, who)
	who, found = tokens.Authenticate("auditor-token-0123456789")
	require.True(t, found)
	require.Regexp(t, `^auditor-[0-9a-f]{8}$`, who.Name)
	_, found = tokens.Authenticate("operator-token-012345678")
	require.False(t, found)

	bad := map[string]string{
		"admin aaaaaaaaaaaaaaaaaaaa\n":     "tokens:1: unknown role \"admin\"",
		"# c\n\nagent\n":                   "tokens:3: want ROLE sha256:DIGEST [NAME]",
		"agent short\n":                    "tokens:1: token is 5 characters",
		"agent aaaaaaaaaaaaaaaaaaaa a b\n": "tokens:1: want ROLE sha256:DIGEST [NAME] (or ROLE TOKEN [NAME]), got 4 fields",
		"agent aaaaaaaaaaaaaaaaaaaa\nworker aaaaaaaaaaaaaaaaaaaa\n": "tokens:2: the token of line 1 is given again",
		"# only comments\n":                         "no tokens",
		"agent " + strings.Repeat("a", 5000) + "\n": "longer than",
	}
	for text, want := range bad {
		_, err := httpapi.ParseTokens(strings.NewReader(text), "tokens")
		require.ErrorContains(t, err, want, text[:min(len(text), 40)])
		require.NotContains(t, err.Error(), "aaaaaaaaaaaaaaaaaaaa", "errors never show a token")
	}
	_, err = httpapi.LoadTokens("")
	require.ErrorContains(t, err, httpapi.TokensEnvVar)
	_, err = httpapi.LoadTokens(t.TempDir() + "/missing")
	require.ErrorContains(t, err, "token file")
}
