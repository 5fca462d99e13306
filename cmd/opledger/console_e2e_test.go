package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// `opledger serve` serves the console at /ui/ beside the API, on the same
// tokens: an auditor signs in with the token pasted into the form and reads
// an operation the API wrote, with its timeline; its resolve is refused by
// role and a form without the CSRF token is refused.
func TestServeMountsTheConsole(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real processes")
	}
	t.Parallel()
	s := newSystem(t)
	op, token := s.approve("console-e2e")
	c := s.claim(op, token, "MSG-C1")
	require.Equal(t, "Claimed", c.body["status"], c.body)
	x := c.body["execution_id"].(string)

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	base := "http://" + s.api
	get := func(path string) (int, string) {
		t.Helper()
		res, err := client.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		res, err := client.PostForm(base+path, form)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)

	status, body := get("/ui/operations")
	require.Equal(t, 200, status, "redirected to the sign-in form")
	require.Contains(t, body, `action="/ui/signin"`)
	status, body = post("/ui/signin", url.Values{"csrf": {csrf.FindStringSubmatch(body)[1]}, "token": {auditorToken}, "next": {"/ui/operations/" + op}})
	require.Equal(t, 200, status, body)
	require.Contains(t, body, "audit-1 (auditor)")
	require.Contains(t, body, "<svg", "the timeline")
	require.Contains(t, body, "Claimed")
	require.Contains(t, body, x)

	sessionCSRF := csrf.FindStringSubmatch(body)[1]
	status, body = post("/ui/executions/"+x+"/resolve", url.Values{"csrf": {sessionCSRF}, "outcome": {"Completed"}, "evidence": {"x"}})
	require.Equal(t, 403, status)
	require.Contains(t, body, "Role auditor may not resolve")
	status, body = post("/ui/executions/"+x+"/resolve", url.Values{"outcome": {"Completed"}, "evidence": {"x"}})
	require.Equal(t, 403, status)
	require.Contains(t, body, "CSRF token missing or wrong")
	r := s.call("GET", "/v1/operations/"+op+"/events", auditorToken, nil)
	require.Equal(t, 200, r.status)
	for _, ev := range r.body["events"].([]any) {
		require.NotEqual(t, "Reconciled", ev.(map[string]any)["type"], "nothing was resolved")
	}
	require.False(t, strings.Contains(body, "resolved as"))
}
