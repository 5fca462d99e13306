package console_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/console"
	"opledger/adapters/harness"
	"opledger/adapters/httpapi"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/ledger"
)

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so each answer can be checked.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func (s *served) browser(base string) *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(s.t, err)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if strings.HasPrefix(base, "https:") {
		c.Transport = s.tlsTransport
	}
	return &browser{t: s.t, base: base, c: c}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return page{status: res.StatusCode, header: res.Header, body: string(body)}
}

func (b *browser) get(path string, headers ...string) page {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodGet, b.base+path, nil)
	require.NoError(b.t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return b.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token a page's forms carry.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	require.NotNil(t, m, "the page has a form with a CSRF token")
	return html.UnescapeString(m[1])
}

// text is the page without its tags, for reading what it says.
func (p page) text() string {
	return html.UnescapeString(strings.Join(strings.Fields(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(p.body, " ")), " "))
}

// signIn pastes role's token into the sign-in form.
func (b *browser) signIn(role httpapi.Role) page {
	b.t.Helper()
	form := b.get("/ui/signin")
	require.Equal(b.t, http.StatusOK, form.status)
	return b.post("/ui/signin", url.Values{"csrf": {form.csrf(b.t)}, "token": {tokenOf[role]}, "next": {"/ui/operations"}})
}

func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.base + "/ui/")
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestConsoleOverHTTP walks the console as a browser without JavaScript
// would: sign-in, every page, the live update's fragment, the role matrix,
// CSRF and forged cookies, and each action going through the ledger with
// the signed-in actor.
func TestConsoleOverHTTP(t *testing.T) {
	s := newServed(t)
	ctx := t.Context()

	anon := s.browser(s.srv.URL)
	p := anon.get("/ui/operations?state=Unknown")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/ui/signin?next=%2Fui%2Foperations%3Fstate%3DUnknown", p.header.Get("Location"))
	require.Equal(t, http.StatusSeeOther, anon.get("/ui/").status)
	p = anon.get("/ui/nothing-here")
	require.Equal(t, http.StatusNotFound, p.status)
	require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
	css := anon.get("/ui/static/console.css")
	require.Equal(t, http.StatusOK, css.status)
	require.Contains(t, css.header.Get("Content-Type"), "text/css")

	t.Run("sign-in refusals", func(t *testing.T) {
		b := s.browser(s.srv.URL)
		form := b.get("/ui/signin")
		p := b.post("/ui/signin", url.Values{"csrf": {form.csrf(t)}, "token": {"not-a-token-of-this-server"}})
		require.Equal(t, http.StatusUnauthorized, p.status)
		require.Contains(t, p.text(), "That token is not known to this server.")
		require.Nil(t, b.cookie("opledger_session"))
		p = b.post("/ui/signin", url.Values{"token": {tokenOf[httpapi.RoleOperator]}})
		require.Equal(t, http.StatusForbidden, p.status, "a sign-in without its CSRF token is refused")
		require.Nil(t, b.cookie("opledger_session"))
		require.NotContains(t, s.logs.String(), tokenOf[httpapi.RoleOperator], "tokens are never logged")
	})

	auditor := s.browser(s.srv.URL)
	p = auditor.signIn(httpapi.RoleAuditor)
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/ui/operations", p.header.Get("Location"))
	var sessionHeader string
	for _, h := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(h, "opledger_session=") {
			sessionHeader = h
		}
	}
	require.Contains(t, sessionHeader, "HttpOnly")
	require.Contains(t, sessionHeader, "SameSite=Strict")
	require.Contains(t, sessionHeader, "Path=/ui/")
	require.Contains(t, sessionHeader, "Max-Age=28800")
	require.NotContains(t, sessionHeader, "Secure", "plain HTTP: not Secure unless configured")
	require.NotContains(t, sessionHeader, tokenOf[httpapi.RoleAuditor], "the token is sealed, not readable in the cookie")

	t.Run("pages", func(t *testing.T) {
		p := auditor.get("/ui/operations")
		require.Equal(t, http.StatusOK, p.status)
		text := p.text()
		for _, want := range []string{"audrey (auditor)", "OP-4471", "OP-4472", "OP-4473", "Completed", "Escalated", "120.00 EUR", "Escalated 1"} {
			require.Contains(t, text, want)
		}
		require.Contains(t, p.body, `data-refresh="1"`, "the page updates itself while open")
		require.Contains(t, text, "OP-4474 Authorized export-download export EXP-4474 COR-OP-4474",
			"an export download lists its kind and export, not an amount and an order it does not have")

		x := auditor.get("/ui/operations/" + string(opExport))
		require.Equal(t, http.StatusOK, x.status)
		xt := x.text()
		for _, want := range []string{"export-download of export EXP-4474", "Uses left 3", "0 of 3 claimed, 3 left"} {
			require.Contains(t, xt, want)
		}
		require.NotContains(t, xt, "Amount")
		refund := auditor.get("/ui/operations/" + string(opPending)).text()
		require.Contains(t, refund, "25.00 EUR")
		require.NotContains(t, refund, "claimed, ", "a refund's capability has no uses column")

		p = auditor.get("/ui/operations?q=ORD-8842")
		require.Contains(t, p.text(), "OP-4472")
		require.NotContains(t, p.text(), "OP-4471 ")
		p = auditor.get("/ui/operations?state=Escalated")
		require.Contains(t, p.text(), "OP-4472")
		require.NotContains(t, p.body, `href="/ui/operations/OP-4471"`)
		p = auditor.get("/ui/operations?replay=1")
		require.Contains(t, p.body, `href="/ui/operations/OP-4471"`)
		require.NotContains(t, p.body, `href="/ui/operations/OP-4472"`)
		require.Equal(t, http.StatusBadRequest, auditor.get("/ui/operations?state=Bogus").status)
		require.Equal(t, http.StatusBadRequest, auditor.get("/ui/operations?after=garbage").status)

		p = auditor.get("/ui/operations/OP-4471")
		require.Equal(t, http.StatusOK, p.status)
		text = p.text()
		for _, want := range []string{"LeaseLapsed: EXE-4471.1 Unknown, epoch 1→2", "Reconciled Completed (provider-lookup)",
			"refused: AlreadyConsumed (capability.already-consumed), replay suspected", "agent / API", "worker-a", "sweeper",
			"reconciler", "provider", "Lease holder", "re_sim", "The same history as JSON"} {
			require.Contains(t, text, want)
		}
		require.Contains(t, p.body, "<svg", "the timeline is drawn server-side")
		require.NotContains(t, p.body, `action="/ui/executions/`, "an auditor gets no resolve form")
		require.Equal(t, http.StatusNotFound, auditor.get("/ui/operations/OP-9999").status)
		require.Equal(t, http.StatusBadRequest, auditor.get("/ui/operations/bad%20id").status)

		js := auditor.get("/ui/operations/OP-4471/history.json")
		require.Equal(t, http.StatusOK, js.status)
		var doc audit.TimelineJSON
		require.NoError(t, json.Unmarshal([]byte(js.body), &doc))
		rows, err := audit.Replay(ctx, s.world.Store, harness.StoryOperation)
		require.NoError(t, err)
		require.Equal(t, rows, doc.Rows, "the same history as audit replay")

		p = auditor.get("/ui/escalations")
		require.Contains(t, p.text(), string(s.escalated))
		require.Contains(t, p.text(), "reconciliation.cannot-tell")
		require.Contains(t, p.text(), "Only operators resolve")
		require.NotContains(t, p.body, `action="/ui/executions/`)

		p = auditor.get("/ui/evidence?kind=replay")
		require.Contains(t, p.text(), "capability.already-consumed")
		require.Contains(t, p.text(), "replay suspected")
		require.Equal(t, http.StatusBadRequest, auditor.get("/ui/evidence?kind=nope").status)
		p = auditor.get("/ui/evidence?kind=refused-writes")
		require.Contains(t, p.text(), "WriteRefused")
		require.Contains(t, p.text(), string(s.escalated))
		p = auditor.get("/ui/evidence?kind=forged")
		require.Contains(t, p.text(), "capability.invalid")
		require.Contains(t, p.text(), "MSG-F0RGED")

		p = auditor.get("/ui/dead-letters")
		require.Contains(t, p.text(), s.deadLetter)
		require.Contains(t, p.text(), "delivery.attempts-exhausted")
		require.NotContains(t, p.body, `action="/ui/dead-letters/resubmit"`)

		p = auditor.get("/ui/health")
		text = p.text()
		for _, want := range []string{"Behind the log", "projector", "refund-requests", "EXE-4499.1", "store.error",
			"Writes are NOT synchronously replicated", "synchronous_standby_names is empty"} {
			require.Contains(t, text, want)
		}
	})

	t.Run("live update fragment", func(t *testing.T) {
		p := auditor.get("/ui/escalations", "X-Console-Fragment", "main")
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "<html", "only the main content")
		require.Contains(t, p.body, string(s.escalated))
		etag := p.header.Get("ETag")
		require.NotEmpty(t, etag)
		p = auditor.get("/ui/escalations", "X-Console-Fragment", "main", "If-None-Match", etag)
		require.Equal(t, http.StatusNotModified, p.status, "unchanged: nothing sent")
	})

	escalatedState := func() domain.ExecutionState {
		st, err := s.world.State(ctx, opEscalated)
		require.NoError(t, err)
		return st.Execution(s.escalated).State
	}
	resolveForm := url.Values{"outcome": {"Completed"}, "provider_reference": {"re_manual_1"}, "evidence": {"seen on the provider's dashboard"}}

	t.Run("an auditor may not resolve", func(t *testing.T) {
		form := url.Values{"csrf": {auditor.get("/ui/escalations").csrf(t)}}
		for k, v := range resolveForm {
			form[k] = v
		}
		p := auditor.post("/ui/executions/"+string(s.escalated)+"/resolve", form)
		require.Equal(t, http.StatusForbidden, p.status)
		require.Contains(t, p.text(), "Role auditor may not resolve")
		require.Equal(t, domain.ExecEscalated, escalatedState(), "nothing changed")
	})

	t.Run("forged and altered cookies are refused", func(t *testing.T) {
		good := auditor.cookie("opledger_session")
		require.NotNil(t, good)
		for name, value := range map[string]string{
			"forged":  "eyJ2IjoxLCJ0IjoiYXVkaXRvci10b2tlbi0wMTIzNDU2Nzg5In0",
			"altered": good.Value[:len(good.Value)-2] + flip(good.Value[len(good.Value)-2:]),
			"empty":   "x",
		} {
			b := s.browser(s.srv.URL)
			u, _ := url.Parse(s.srv.URL + "/ui/")
			b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "opledger_session", Value: value, Path: "/ui/"}})
			p := b.get("/ui/operations")
			require.Equal(t, http.StatusUnauthorized, p.status, name)
			require.Contains(t, p.text(), "The session cookie was refused", name)
			require.Equal(t, http.StatusUnauthorized, b.post("/ui/signout", url.Values{"csrf": {"x"}}).status, name)
		}
		// A cookie sealed under another console's key is refused too.
		other := s.cfg
		other.SessionKey = []byte(strings.Repeat("k", console.MinKeyLength))
		srv := s.variant(other)
		b := s.browser(srv.URL)
		u, _ := url.Parse(srv.URL + "/ui/")
		b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "opledger_session", Value: good.Value, Path: "/ui/"}})
		require.Equal(t, http.StatusUnauthorized, b.get("/ui/operations").status)
	})

	operator := s.browser(s.srv.URL)
	require.Equal(t, http.StatusSeeOther, operator.signIn(httpapi.RoleOperator).status)

	t.Run("missing or wrong CSRF token is refused", func(t *testing.T) {
		p := operator.post("/ui/executions/"+string(s.escalated)+"/resolve", resolveForm)
		require.Equal(t, http.StatusForbidden, p.status)
		require.Contains(t, p.text(), "CSRF token missing or wrong")
		form := url.Values{"csrf": {auditor.get("/ui/escalations").csrf(t)}} // another session's token
		for k, v := range resolveForm {
			form[k] = v
		}
		require.Equal(t, http.StatusForbidden, operator.post("/ui/executions/"+string(s.escalated)+"/resolve", form).status)
		require.Equal(t, domain.ExecEscalated, escalatedState(), "nothing changed")
		csrf := operator.get("/ui/escalations").csrf(t)
		p = operator.post("/ui/executions/"+string(s.escalated)+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"Completed"}, "evidence": {"x"}},
			"Origin", "http://evil.example")
		require.Equal(t, http.StatusForbidden, p.status, "a form from another site")
		require.Equal(t, domain.ExecEscalated, escalatedState())
	})

	t.Run("an operator resolves the escalation", func(t *testing.T) {
		page := operator.get("/ui/escalations")
		require.Contains(t, page.body, `action="/ui/executions/`+string(s.escalated)+`/resolve"`)
		csrf := page.csrf(t)
		p := operator.post("/ui/executions/"+string(s.escalated)+"/resolve", url.Values{"csrf": {csrf}, "outcome": {"Completed"}})
		require.Equal(t, http.StatusBadRequest, p.status, "evidence is required")
		require.Contains(t, p.text(), "evidence is required")
		form := url.Values{"csrf": {csrf}, "back": {"/ui/escalations"}}
		for k, v := range resolveForm {
			form[k] = v
		}
		p = operator.post("/ui/executions/"+string(s.escalated)+"/resolve", form)
		require.Equal(t, http.StatusSeeOther, p.status, p.text())
		require.Equal(t, "/ui/escalations", p.header.Get("Location"))
		require.Equal(t, domain.ExecCompleted, escalatedState())
		ev := lastEvent(t, s, opEscalated)
		rec, ok := ev.(domain.Reconciled)
		require.True(t, ok, "%T", ev)
		require.Equal(t, domain.MethodOperator, rec.Method)
		require.Equal(t, "olga", rec.Actor, "recorded with the signed-in actor")
		require.Equal(t, "re_manual_1", rec.ProviderReference)
		require.Equal(t, "seen on the provider's dashboard", rec.Evidence)
		p = operator.get("/ui/escalations")
		require.Contains(t, p.text(), "resolved as Completed by olga", "the action's message, once")
		require.NotContains(t, operator.get("/ui/escalations").text(), "resolved as Completed by olga")

		// Resolving again meets the ledger's refusal.
		p = operator.post("/ui/executions/"+string(s.escalated)+"/resolve", form)
		require.Equal(t, http.StatusConflict, p.status)
		require.Contains(t, p.text(), "execution.not-unknown")
	})

	t.Run("an operator revokes unused authority", func(t *testing.T) {
		st, err := s.world.State(ctx, opPending)
		require.NoError(t, err)
		var capID domain.CapabilityID
		for id := range st.Capabilities {
			capID = id
		}
		csrf := operator.get("/ui/operations/" + string(opPending)).csrf(t)
		p := operator.post("/ui/capabilities/"+string(capID)+"/revoke", url.Values{"csrf": {csrf}, "reason": {"customer withdrew"},
			"back": {"https://evil.example/"}})
		require.Equal(t, http.StatusSeeOther, p.status, p.text())
		require.Equal(t, "/ui/operations/"+string(opPending), p.header.Get("Location"), "never redirected off the console")
		st, err = s.world.State(ctx, opPending)
		require.NoError(t, err)
		require.Equal(t, domain.CapRevoked, st.Capabilities[capID].State)
		rev, ok := lastEvent(t, s, opPending).(domain.CapabilityRevoked)
		require.True(t, ok)
		require.Equal(t, "olga", rev.RevokedBy)
	})

	t.Run("an operator resubmits; the ledger still refuses the copy", func(t *testing.T) {
		require.Equal(t, http.StatusForbidden, auditor.post("/ui/dead-letters/resubmit",
			url.Values{"csrf": {auditor.get("/ui/dead-letters").csrf(t)}, "id": {s.deadLetter}}).status)
		csrf := operator.get("/ui/dead-letters").csrf(t)
		p := operator.post("/ui/dead-letters/resubmit", url.Values{"csrf": {csrf}, "id": {s.deadLetter}})
		require.Equal(t, http.StatusSeeOther, p.status, p.text())
		dead, err := s.queue.ListDeadLetters(ctx, 10)
		require.NoError(t, err)
		require.NotNil(t, dead[0].Resubmitted)
		require.Equal(t, "olga", dead[0].Resubmitted.By)
		copyID := dead[0].Resubmitted.MessageID
		p = operator.post("/ui/dead-letters/resubmit", url.Values{"csrf": {csrf}, "id": {s.deadLetter}})
		require.Equal(t, http.StatusConflict, p.status, "resubmitted once")

		// A worker takes the copy: the ledger refuses its spent authority.
		res := s.deliverCopy(copyID)
		require.Equal(t, domain.StatusAlreadyConsumed, res.Claim.Status)
		require.True(t, res.Claim.ReplaySuspected)
		require.False(t, res.Executed)
		require.Equal(t, 1, s.world.Sim.Ledger().ByOperation[string(harness.StoryOperation)].RefundsCreated, "still one refund")
		waitFor(t, "the refused copy on the evidence page", func() bool {
			return strings.Contains(operator.get("/ui/evidence?kind=replay").text(), string(copyID))
		})
	})

	t.Run("a flooded stream makes a bounded page", func(t *testing.T) {
		const flooded domain.OperationID = "OP-4480"
		r, err := s.world.Approve(ctx, flooded, "ORD-8850", 1000)
		require.NoError(t, err)
		for range 220 { // the first claims, the rest duplicate deliveries
			_, err := s.world.Ledger.Claim(ctx, flooded, domain.Claim{MessageID: "MSG-FLOOD", CapabilityID: r.Capability, WorkerID: "worker-f",
				CorrelationID: "COR-" + domain.CorrelationID(flooded)})
			require.NoError(t, err)
		}
		p := operator.get("/ui/operations/" + string(flooded))
		require.Equal(t, http.StatusOK, p.status)
		require.Contains(t, p.text(), "219 refusals (#e0–#e218: DeliveryDuplicated ×16, RefusalsSummarized ×203) — reasons delivery.duplicate ×219; by worker-f;",
			"the duplicates in the evidence stream, counted in one line: 16 one by one, then each counted by a summary (its callers came one at a time)")
		require.Less(t, strings.Count(p.body, `<g class="step `), 12, "and drawn as one step")
		// The deliveries table says what its times seen leaves to the
		// summaries, once the read models hold them.
		waitFor(t, "the summarized duplicates under the deliveries table", func() bool {
			return strings.Contains(operator.get("/ui/operations/"+string(flooded)).text(),
				"203 more duplicate deliveries, past the evidence bound, are counted in summaries")
		})
	})

	t.Run("sign out", func(t *testing.T) {
		csrf := operator.get("/ui/operations").csrf(t)
		p := operator.post("/ui/signout", url.Values{"csrf": {csrf}})
		require.Equal(t, http.StatusSeeOther, p.status)
		require.Equal(t, http.StatusSeeOther, operator.get("/ui/operations").status, "signed out: sent to sign in")
	})
}

// TestSessionLifetimeAndTransport: a session ends when it expires or when
// its token is no longer accepted, and its cookie is Secure over TLS.
func TestSessionLifetimeAndTransport(t *testing.T) {
	s := newServed(t)
	b := s.browser(s.srv.URL)
	require.Equal(t, http.StatusSeeOther, b.signIn(httpapi.RoleAuditor).status)
	session := b.cookie("opledger_session")

	later := s.cfg
	later.Now = func() time.Time { return time.Now().Add(console.DefaultSessionTTL + time.Minute) }
	srv := s.variant(later)
	c := s.browser(srv.URL)
	u, _ := url.Parse(srv.URL + "/ui/")
	c.c.Jar.SetCookies(u, []*http.Cookie{{Name: "opledger_session", Value: session.Value, Path: "/ui/"}})
	p := c.get("/ui/operations")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.text(), "Your session has expired")

	fewer := s.cfg
	tokens, err := httpapi.ParseTokens(strings.NewReader("operator operator-token-0123456789 olga\n"), "reloaded")
	require.NoError(t, err)
	fewer.Tokens = tokens // the tokens file reloaded without the auditor's token
	srv = s.variant(fewer)
	c = s.browser(srv.URL)
	u, _ = url.Parse(srv.URL + "/ui/")
	c.c.Jar.SetCookies(u, []*http.Cookie{{Name: "opledger_session", Value: session.Value, Path: "/ui/"}})
	p = c.get("/ui/operations")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.text(), "no longer accepted")

	tlsSrv := httptest.NewUnstartedServer(mustConsole(t, s.cfg))
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	s.tlsTransport = tlsSrv.Client().Transport
	secure := s.browser(tlsSrv.URL)
	p = secure.signIn(httpapi.RoleAuditor)
	require.Equal(t, http.StatusSeeOther, p.status)
	found := false
	for _, h := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(h, "opledger_session=") {
			found = true
			require.Contains(t, h, "Secure", "over TLS the cookie is Secure")
		}
	}
	require.True(t, found)
}

func mustConsole(t *testing.T, cfg console.Config) *console.Console {
	t.Helper()
	c, err := console.New(cfg)
	require.NoError(t, err)
	return c
}

// variant serves a console of cfg (on the fixture's data) by itself.
func (s *served) variant(cfg console.Config) *httptest.Server {
	srv := httptest.NewServer(mustConsole(s.t, cfg))
	s.t.Cleanup(srv.Close)
	return srv
}

// deliverCopy takes the resubmitted copy off the queue and hands it to a
// worker, as a worker process would.
func (s *served) deliverCopy(id domain.MessageID) workerResult {
	s.t.Helper()
	ctx := s.t.Context()
	deadline := time.Now().Add(waitBound)
	for {
		claimed, err := s.queue.Claim(ctx, "fixture", 10)
		require.NoError(s.t, err)
		for _, c := range claimed {
			if c.MessageID != string(id) {
				require.NoError(s.t, s.queue.Settle(ctx, c, transport.Disposition{Action: transport.ActionRetry}))
				continue
			}
			req, err := transport.DecodeRefundRequest(c.Value)
			require.NoError(s.t, err)
			wk, err := s.world.Worker("worker-e")
			require.NoError(s.t, err)
			res, err := wk.Handle(ctx, req.Delivery())
			require.NoError(s.t, err)
			require.NoError(s.t, s.queue.Settle(ctx, c, transport.Disposition{Action: transport.ActionAck}))
			return res
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the copy %s was not on the queue within %s", id, waitBound)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// lastEvent is the last event of op's stream.
func lastEvent(t *testing.T, s *served, op domain.OperationID) domain.Event {
	t.Helper()
	recs, err := s.world.Store.ReadStream(t.Context(), op.StreamName(), 0, 1000)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	e, err := ledger.DecodeRecorded(recs[len(recs)-1])
	require.NoError(t, err)
	return e
}

// waitFor polls cond, failing the test after waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitBound, what)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// flip changes a base64url text so it decodes to other bytes.
func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}
