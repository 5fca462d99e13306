package console_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/ledger"
)

// TestConsoleInTheBrowser drives the console in headless Chromium over the
// seed's story as serve serves it: the timeline reads LeaseLapsed → Unknown
// → Reconciled and the Friday refusal with replay suspected; an auditor's
// attempt to resolve is refused; a forged session cookie and a form without
// its CSRF token are refused; an operator resolves the escalation with the
// form; an open page updates itself; every page fits 390 and 1280 px
// without sideways scrolling; the keyboard reaches the content first.
func TestConsoleInTheBrowser(t *testing.T) {
	alloc := newBrowser(t) // skips loudly when no browser can be had
	s := newServed(t)
	began := time.Now()
	ctx := t.Context()

	auditor := newTab(t, alloc, s.srv.URL)
	require.EqualValues(t, 200, auditor.open("/ui/operations"), "not signed in: the sign-in page")
	require.Equal(t, "Sign in", auditor.text("h1"))
	auditor.signIn(httpapi.RoleAuditor)

	t.Run("the timeline tells the story", func(t *testing.T) {
		require.EqualValues(t, 200, auditor.open("/ui/operations/OP-4471"))
		labels := eval[[]string](auditor, `Array.from(document.querySelectorAll('svg.seq g.step .label')).map(e => e.textContent)`)
		at := func(part string) int {
			t.Helper()
			i := slices.IndexFunc(labels, func(l string) bool { return strings.Contains(l, part) })
			require.GreaterOrEqual(t, i, 0, "no step says %q in %q", part, labels)
			return i
		}
		lapsed := at("LeaseLapsed: EXE-4471.1 Unknown")
		reconciled := at("Reconciled Completed")
		friday := at("refused: AlreadyConsumed (capability.already-consumed), replay suspected")
		require.Less(t, at("Claimed"), lapsed)
		require.Less(t, lapsed, reconciled)
		require.Less(t, reconciled, friday)
		lanes := eval[[]string](auditor, `Array.from(document.querySelectorAll('svg.seq g.lane text')).map(e => e.textContent)`)
		require.Equal(t, []string{"agent / API", "queue", "worker-a", "worker-b", "worker-c", "ledger", "sweeper", "reconciler", "provider"}, lanes)
		days := eval[[]string](auditor, `Array.from(document.querySelectorAll('svg.seq g.day text')).map(e => e.textContent)`)
		require.Equal(t, []string{"Thu 2026-11-26 (UTC)", "Fri 2026-11-27 (UTC)"}, days)
		// The refusal is drawn as one: a cross, in the alert tone.
		require.True(t, eval[bool](auditor, `[...document.querySelectorAll('svg.seq g.step')].some(g =>
			g.classList.contains('step-refused') && g.classList.contains('tone-alert') &&
			g.querySelector('line').getAttribute('marker-end') === 'url(#cross)' && g.textContent.includes('replay suspected'))`))
		require.Contains(t, auditor.text("#provider-reference"), "re_sim")
	})

	t.Run("an auditor's attempt to resolve is refused", func(t *testing.T) {
		require.EqualValues(t, 200, auditor.open("/ui/escalations"))
		require.Zero(t, eval[int](auditor, `document.querySelectorAll('form.resolve').length`), "no form for an auditor")
		csrf := eval[string](auditor, csrfOfPage)
		status := auditor.submit(postForm("/ui/executions/"+string(s.escalated)+"/resolve",
			map[string]string{"csrf": csrf, "outcome": "Completed", "evidence": "the auditor says so"}))
		require.EqualValues(t, 403, status)
		require.Equal(t, "Refused: not allowed for role auditor", auditor.text("#problem"))
		st, err := s.world.State(ctx, opEscalated)
		require.NoError(t, err)
		require.Equal(t, domain.ExecEscalated, st.Execution(s.escalated).State, "nothing changed")
	})

	t.Run("a forged session cookie is refused", func(t *testing.T) {
		forger := newTab(t, alloc, s.srv.URL)
		forger.setCookie("opledger_session", "eyJ2IjoxLCJ0Ijoib3BlcmF0b3ItdG9rZW4tMDEyMzQ1Njc4OSJ9")
		require.EqualValues(t, 401, forger.open("/ui/escalations"))
		require.Equal(t, "Session refused", forger.text("#problem"))
		require.Contains(t, forger.text("#problem-message"), "The session cookie was refused")
	})

	operator := newTab(t, alloc, s.srv.URL)
	operator.signIn(httpapi.RoleOperator)

	t.Run("a form without its CSRF token is refused", func(t *testing.T) {
		require.EqualValues(t, 200, operator.open("/ui/escalations"))
		status := operator.submit(postForm("/ui/executions/"+string(s.escalated)+"/resolve",
			map[string]string{"outcome": "Completed", "evidence": "no token with this form"}))
		require.EqualValues(t, 403, status)
		require.Equal(t, "Refused: CSRF token missing or wrong", operator.text("#problem"))
		st, err := s.world.State(ctx, opEscalated)
		require.NoError(t, err)
		require.Equal(t, domain.ExecEscalated, st.Execution(s.escalated).State, "nothing changed")
	})

	t.Run("an operator resolves the escalation", func(t *testing.T) {
		require.EqualValues(t, 200, operator.open("/ui/escalations"))
		form := "section.escalation form.resolve "
		operator.do(
			chromedp.Click(chromedp.CSS(form+`input[value="Completed"]`)),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="provider_reference"]`), "re_manual_7"),
			chromedp.SendKeys(chromedp.CSS(form+`textarea[name="evidence"]`), "refund seen on the provider dashboard, ticket 5512"),
		)
		require.EqualValues(t, 200, operator.submit(chromedp.Click(chromedp.CSS(form+`button[type="submit"]`))))
		require.Contains(t, operator.text("#flash"), "resolved as Completed by olga")
		st, err := s.world.State(ctx, opEscalated)
		require.NoError(t, err)
		require.Equal(t, domain.ExecCompleted, st.Execution(s.escalated).State)
		rec, ok := lastEvent(t, s, opEscalated).(domain.Reconciled)
		require.True(t, ok)
		require.Equal(t, "olga", rec.Actor)
		require.Equal(t, domain.MethodOperator, rec.Method)
		require.Equal(t, "re_manual_7", rec.ProviderReference)
	})

	t.Run("an open page updates itself", func(t *testing.T) {
		require.EqualValues(t, 200, auditor.open("/ui/operations/"+string(opPending)))
		stateCell := `document.querySelector('table.capabilities tbody td[data-label="State"]').textContent.trim()`
		require.Equal(t, "Issued", eval[string](auditor, stateCell))
		st, err := s.world.State(ctx, opPending)
		require.NoError(t, err)
		var capID domain.CapabilityID
		for id := range st.Capabilities {
			capID = id
		}
		require.NoError(t, s.world.Ledger.RevokeCapability(ctx, opPending, domain.RevokeCapability{CapabilityID: capID, Reason: "customer withdrew",
			Actor: "agent-9"}, ledger.Cause{Actor: "agent-9"}))
		pctx, cancel := auditor.bounded()
		defer cancel()
		_, err = chromedp.Run(pctx, chromedp.Poll[bool](stateCell+` === 'Revoked'`,
			chromedp.WithPollingTimeout(browserBound)))
		require.NoError(t, err, "the page showed the revocation without a reload")
		require.Contains(t, auditor.text("#live"), "Updated at")
	})

	t.Run("keyboard first: the skip link, then the content", func(t *testing.T) {
		require.EqualValues(t, 200, auditor.open("/ui/operations"))
		auditor.do(chromedp.KeyEvent("\t"))
		require.Equal(t, "Skip to content", eval[string](auditor, `document.activeElement.textContent`))
		auditor.do(chromedp.KeyEvent("\r"))
		require.Equal(t, "main", eval[string](auditor, `document.activeElement.id`))
	})

	t.Run("the pictures of the last hour and day", func(t *testing.T) {
		require.EqualValues(t, 200, auditor.open("/ui/health"))
		charts := eval[[]string](auditor, `[...document.querySelectorAll('figure.chart')].map(f => f.id)`)
		require.Equal(t, []string{"chart-operations", "chart-doubt", "chart-lag"}, charts)
		require.Equal(t, "Last hour", auditor.text(".charts .windows strong"))
		bars := eval[[]string](auditor, `[...new Set([...document.querySelectorAll('#chart-operations rect')].map(r => r.getAttribute('class')))]`)
		require.Contains(t, bars, "s-completed", "the story's operations, by the state they are in now")
		require.Equal(t, "now 0 Unknown and 0 escalated; at most 1 in this window", eval[string](auditor, `document.querySelector('#chart-doubt desc').textContent`),
			"the escalation waited within the hour, and the operator resolved it above")
		lag := eval[int](auditor, `document.querySelectorAll('#chart-lag polyline.l-series0').length`)
		require.Equal(t, 2, lag, "the projector's line has a gap where no sample was recorded")
		require.Contains(t, eval[string](auditor, `document.querySelector('#chart-lag desc').textContent`), "the most behind was 1m3s")
		require.Equal(t, []string{"projector (read models)", "relay:refund-requests"},
			eval[[]string](auditor, `[...document.querySelectorAll('#chart-lag .legend li')].map(l => l.textContent)`))

		require.EqualValues(t, 200, auditor.open("/ui/health?span=day"))
		require.Equal(t, "Last day", auditor.text(".charts .windows strong"))
		require.EqualValues(t, 400, auditor.open("/ui/health?span=week"), "a window is hour or day")
		require.Contains(t, auditor.text("#problem-message"), "span")

		require.EqualValues(t, 200, auditor.open("/ui/operations?state=Completed"))
		require.Equal(t, []string{"chart-operations", "chart-doubt"}, eval[[]string](auditor, `[...document.querySelectorAll('figure.chart')].map(f => f.id)`))
		day := eval[string](auditor, `document.querySelector('.charts .windows a').getAttribute('href')`)
		require.Contains(t, day, "span=day")
		require.Contains(t, day, "state=Completed", "the other window keeps the list's filter")

		// At 390 px the pictures fit, and their text is still about 10 px.
		auditor.do(chromedp.EmulateViewport(390, 844))
		require.EqualValues(t, 200, auditor.open("/ui/health"))
		width := eval[float64](auditor, `document.querySelector('#chart-lag svg').getBoundingClientRect().width`)
		require.LessOrEqual(t, width, 390.0)
		text := eval[float64](auditor, `document.querySelector('#chart-lag .xaxis text').getBoundingClientRect().height`)
		require.GreaterOrEqual(t, text, 9.0, "an axis label at 390 px")
		auditor.do(chromedp.ResetViewport())
	})

	t.Run("every page fits 390 and 1280 px", func(t *testing.T) {
		pages := []string{"/ui/operations", "/ui/operations/OP-4471", "/ui/escalations", "/ui/evidence", "/ui/dead-letters", "/ui/health"}
		for _, width := range []int64{390, 1280} {
			auditor.do(chromedp.EmulateViewport(width, 844))
			for _, p := range pages {
				require.EqualValues(t, 200, auditor.open(p))
				over := eval[int](auditor, `document.documentElement.scrollWidth - document.documentElement.clientWidth`)
				require.LessOrEqual(t, over, 0, "%s at %d px scrolls sideways by %d px", p, width, over)
			}
		}
		auditor.do(chromedp.ResetViewport())
	})
	t.Logf("browser checks took %s", time.Since(began).Round(time.Millisecond))
}
