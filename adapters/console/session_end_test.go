package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/console"
	"opledger/adapters/httpapi"
	"opledger/domain"
)

// withCookie is a fresh browser on base holding a copy of a session cookie.
func (s *served) withCookie(base string, session *http.Cookie) *browser {
	b := s.browser(base)
	u, _ := url.Parse(base + "/ui/")
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: session.Name, Value: session.Value, Path: "/ui/"}})
	return b
}

// TestSessionsEndWhenEnded: a sign-out ends the session on every instance
// (a copy of its cookie and CSRF token, taken before, can neither read nor
// act, on a second instance either); an operator ends every session of a
// token at once.
func TestSessionsEndWhenEnded(t *testing.T) {
	s := newServed(t)
	second := s.variant(s.cfg) // another serve instance: the same key and session store

	olga := s.browser(s.srv.URL)
	require.Equal(t, http.StatusSeeOther, olga.signIn(httpapi.RoleOperator).status)
	csrf := olga.get("/ui/escalations").csrf(t)
	saved := *olga.cookie("opledger_session")
	require.Equal(t, http.StatusOK, s.withCookie(second.URL, &saved).get("/ui/escalations").status, "the copy works on the second instance, before")

	require.Equal(t, http.StatusSeeOther, olga.post("/ui/signout", url.Values{"csrf": {csrf}}).status)

	for _, base := range []string{s.srv.URL, second.URL} {
		p := s.withCookie(base, &saved).get("/ui/escalations")
		require.Equal(t, http.StatusUnauthorized, p.status, base)
		require.Contains(t, p.text(), "This session was ended")
		p = s.withCookie(base, &saved).post("/ui/executions/"+string(s.escalated)+"/resolve",
			url.Values{"csrf": {csrf}, "outcome": {"Completed"}, "evidence": {"resolved with a copied cookie after sign-out"}})
		require.Equal(t, http.StatusUnauthorized, p.status, base)
	}
	st, err := s.world.State(t.Context(), opEscalated)
	require.NoError(t, err)
	require.Equal(t, domain.ExecEscalated, st.Execution(s.escalated).State, "nothing was resolved")

	// Two sessions of the auditor's token, on the two instances; an
	// operator ends them all.
	a1, a2 := s.browser(s.srv.URL), s.browser(second.URL)
	require.Equal(t, http.StatusSeeOther, a1.signIn(httpapi.RoleAuditor).status)
	require.Equal(t, http.StatusSeeOther, a2.signIn(httpapi.RoleAuditor).status)
	require.Equal(t, http.StatusOK, a2.get("/ui/health").status)
	ops := s.browser(second.URL)
	require.Equal(t, http.StatusSeeOther, ops.signIn(httpapi.RoleOperator).status)
	health := ops.get("/ui/health")
	require.Contains(t, health.text(), "audrey (auditor)")
	sum := sha256.Sum256([]byte(tokenOf[httpapi.RoleAuditor]))
	p := ops.post("/ui/sessions/end", url.Values{"csrf": {health.csrf(t)}, "token": {hex.EncodeToString(sum[:])}})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, ops.get("/ui/health").text(), "Ended 2 console sessions of token sha256:"+hex.EncodeToString(sum[:])[:12])
	require.Equal(t, http.StatusUnauthorized, a1.get("/ui/health").status)
	require.Equal(t, http.StatusUnauthorized, a2.get("/ui/health").status)
	require.Equal(t, http.StatusOK, ops.get("/ui/health").status, "the operator's own session goes on")

	// An auditor may not end sessions.
	aud := s.browser(s.srv.URL)
	require.Equal(t, http.StatusSeeOther, aud.signIn(httpapi.RoleAuditor).status)
	require.Equal(t, http.StatusForbidden, aud.post("/ui/sessions/end", url.Values{"csrf": {aud.get("/ui/health").csrf(t)},
		"token": {hex.EncodeToString(sum[:])}}).status)
}

// TestConsoleCountsAgainstTheTokensRate: the console's requests take from
// the same per-token bucket as the API's: past it, a page is 429 with
// Retry-After, and so is the API for the same token.
func TestConsoleCountsAgainstTheTokensRate(t *testing.T) {
	s := newServed(t)
	tokens := s.cfg.Tokens.(*httpapi.Tokens)
	api, err := httpapi.New(httpapi.Config{Ledger: s.world.Ledger, Signer: s.signer, Tokens: tokens, ReadModels: s.pool, Schema: s.viewSchema,
		Logger: slog.New(slog.DiscardHandler), RateLimit: httpapi.RateLimit{PerSecond: 0.01, Burst: 6}})
	require.NoError(t, err)
	cfg := s.cfg
	cfg.RateLimit = api.TakeRequest
	ui, err := console.New(cfg)
	require.NoError(t, err)
	api.Mount(console.Prefix, ui)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	b := s.browser(srv.URL)
	require.Equal(t, http.StatusSeeOther, b.signIn(httpapi.RoleAuditor).status) // one of the six
	var statuses []int
	var limited page
	for range 8 { // bounded: past the burst of six
		p := b.get("/ui/operations")
		statuses = append(statuses, p.status)
		if p.status == http.StatusTooManyRequests {
			limited = p
			break
		}
	}
	require.Equal(t, http.StatusTooManyRequests, limited.status, "statuses %v", statuses)
	require.NotEmpty(t, limited.header.Get("Retry-After"))
	require.Contains(t, limited.text(), "over its rate")

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/escalations", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenOf[httpapi.RoleAuditor])
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the API meets the same bucket")
}
