package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// browserBound bounds one browser step (a navigation, a wait).
const browserBound = 30 * time.Second

// RequireBrowserEnv, set to 1 (scripts/test.sh sets it once it has a
// browser), turns a missing browser into a failure instead of a skip.
const RequireBrowserEnv = "OPLEDGER_REQUIRE_BROWSER"

// findChromium returns the headless browser to drive: $OPLEDGER_CHROMIUM,
// else the first of Debian's chromium and its usual names on PATH. With
// none it skips the test loudly (or fails it under RequireBrowserEnv).
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OPLEDGER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "\n" + strings.Repeat("!", 78) + "\n!!! BROWSER TESTS SKIPPED: no Chromium found (install Debian's chromium:\n" +
		"!!!   apt-get update && apt-get install -y chromium, or set OPLEDGER_CHROMIUM=/path/to/chrome).\n" +
		"!!! The console's pages were NOT checked in a real browser.\n" + strings.Repeat("!", 78)
	if os.Getenv(RequireBrowserEnv) == "1" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, msg)
	t.Skip(msg)
	return ""
}

// newBrowser starts one headless Chromium with a fresh profile for the test
// and returns the context of its first tab; tabs opened from it share the
// process.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := findChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	t.Cleanup(cancel)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	// The first Run starts the browser: no timeout on it (see chromedp.Run).
	require.NoError(t, chromedp.Do(root, chromedp.Navigate("about:blank")), "start %s", path)
	return root
}

// tab is one browser context (its own cookies) with one tab, on the
// served console.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// newTab opens a tab in a browser context of its own: a person at their
// own browser.
func newTab(t *testing.T, alloc context.Context, base string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return &tab{t: t, ctx: ctx, base: base}
}

func (b *tab) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, browserBound)
}

// do runs steps, failing the test on an error.
func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// open navigates to path and returns the document's HTTP status.
func (b *tab) open(path string) int64 {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	res, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.base+path))
	require.NoError(b.t, err, path)
	return res.Status
}

// submit runs steps that send a form and returns the status of the page
// the browser ends on (after any redirect).
func (b *tab) submit(steps ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	res, err := chromedp.RunResponse(ctx, steps...)
	require.NoError(b.t, err)
	return res.Status
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *tab, expr string) T {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, expr)
	return v
}

// text is the visible text of the first element sel matches.
func (b *tab) text(sel string) string {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err, sel)
	return s
}

// signIn pastes role's token into the sign-in form, as a person does.
func (b *tab) signIn(role httpapi.Role) {
	b.t.Helper()
	require.EqualValues(b.t, 200, b.open("/ui/signin"))
	b.do(chromedp.SendKeys(chromedp.ID("token"), tokenOf[role]))
	require.EqualValues(b.t, 200, b.submit(chromedp.Click(chromedp.CSS(`form.stack button[type="submit"]`))))
	require.Contains(b.t, b.text("#who"), "("+string(role)+")")
}

// setCookie puts a cookie in this tab's browser context, as someone
// holding a copied or forged value would.
func (b *tab) setCookie(name, value string) {
	b.t.Helper()
	yes := true
	b.do(chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetCookie, network.SetCookieParams{Name: name, Value: value, URL: b.base + "/ui/", Path: "/ui/", HTTPOnly: &yes})
		return err
	}))
}

// postForm builds a form in the page and submits it, as a hand-made
// request from this signed-in browser would; fields without a "csrf"
// entry carry none.
func postForm(action string, fields map[string]string) chromedp.Action[chromedp.Void] {
	var b strings.Builder
	b.WriteString("(() => { const f = document.createElement('form'); f.method = 'post'; f.action = " + jsString(action) + ";")
	for k, v := range fields {
		b.WriteString("{ const i = document.createElement('input'); i.type = 'hidden'; i.name = " + jsString(k) + "; i.value = " + jsString(v) + "; f.appendChild(i); }")
	}
	b.WriteString("document.body.appendChild(f); f.submit(); })()")
	return chromedp.Evaluate[chromedp.Void](b.String())
}

// csrfOfPage is the expression reading this session's CSRF token from the
// page's sign-out form.
const csrfOfPage = `document.querySelector('input[name="csrf"]').value`

func jsString(s string) string { return fmt.Sprintf("%q", s) }
