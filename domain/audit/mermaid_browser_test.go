package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
)

// Hostile text as a worker id, an order id, a message id or a detail may
// carry it: a Mermaid directive that hides every label, a statement end
// and a forged note, markup, math, Markdown, a bidi override and a
// terminal escape, an arrow.
var hostile = []string{
	`%%{init: {"themeCSS": ".messageText, .actor, .noteText {display: none !important}"}}%%`,
	`evil"; Note over ledger: forged #35; end`,
	"<img src=x onerror=alert(1)><br>line",
	"$$\\frac{a}{b}$$ `**md**` [link](x) {x} (y) 'q' & | \\",
	"bidi \u202eoverride\u202c ESC\x1b[31m tab\tnew\nline",
	"wrap:worker -->> ledger: x ;; %% comment",
}

// hostileRows is a timeline whose every free field is hostile.
func hostileRows() []audit.TimelineRow {
	t0 := time.Date(2026, 11, 26, 14, 2, 0, 0, time.UTC)
	var rows []audit.TimelineRow
	add := func(r audit.TimelineRow) {
		r.Version, r.Time = int64(len(rows)), t0.Add(time.Duration(len(rows))*time.Minute)
		rows = append(rows, r)
	}
	add(audit.TimelineRow{Event: domain.TypeOperationRequested, Actor: hostile[1], Detail: "refund of 1.00 EUR on order " + hostile[0] + ", correlation COR-1"})
	add(audit.TimelineRow{Event: domain.TypeDecided, Outcome: "Allowed", Detail: "decision DEC-1 for attempt 1, " + hostile[3]})
	add(audit.TimelineRow{Event: domain.TypeCapabilityIssued, Capability: "CAP-1", Detail: hostile[2]})
	for i, h := range hostile {
		add(audit.TimelineRow{Event: domain.TypeClaimed, Actor: h, Message: domain.MessageID(h), Capability: "CAP-1", Execution: "EXE-1.1", Epoch: 1,
			Detail: "capability consumed, provider key " + h})
		add(audit.TimelineRow{Event: domain.TypePresentationRejected, Actor: hostile[(i+1)%len(hostile)], Message: domain.MessageID(h),
			Capability: domain.CapabilityID(h), Outcome: "AlreadyConsumed", Reason: "capability.already-consumed",
			Detail: "execution not attempted; replay suspected; " + h})
		add(audit.TimelineRow{Event: domain.TypeWriteRefused, Actor: h, Epoch: 1, Reason: h, Detail: h + " refused at epoch 1"})
	}
	add(audit.TimelineRow{Event: domain.TypeCapabilityRevoked, Actor: hostile[4], Capability: domain.CapabilityID(hostile[5]), Detail: hostile[0]})
	add(audit.TimelineRow{Event: domain.TypeOutcomeRecorded, Actor: hostile[5], Outcome: "Completed", Detail: hostile[3]})
	return rows
}

// TestMermaidExportIsTextToMermaid renders `audit replay --format mermaid`
// of a timeline whose every free field is hostile with Mermaid itself (its
// npm package, strict security level) in headless Chromium: the diagram
// parses, and every lane title and every arrow's and note's label is drawn
// as visible text, as the auditor must read it.
func TestMermaidExportIsTextToMermaid(t *testing.T) {
	script, browser := mermaidAndBrowser(t)
	rows := hostileRows()
	var src bytes.Buffer
	require.NoError(t, audit.WriteTimelineMermaid(&src, "OP-1", rows))
	seq := audit.SequenceOf(rows)
	var want []string
	for _, l := range seq.Lanes {
		want = append(want, shown(l.Title))
	}
	for _, s := range seq.Steps {
		label := s.Label
		if s.Style == audit.StepInferred {
			label += " (not recorded)"
		}
		want = append(want, shown(elide(s.Time.UTC().Format("15:04:05")+" "+label, 90)))
	}

	dir := t.TempDir()
	page := filepath.Join(dir, "mermaid.html")
	require.NoError(t, os.WriteFile(page, []byte(`<!doctype html><html><head><meta charset="utf-8"><script src="file://`+script+
		`"></script></head><body><div id="out"></div></body></html>`), 0o644))
	ctx := chromium(t, browser, dir)
	srcJSON, err := json.Marshal(src.String())
	require.NoError(t, err)
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = chromedp.Run(rctx, chromedp.Navigate("file://"+page))
	require.NoError(t, err)
	rendered, err := chromedp.Run(rctx, chromedp.Evaluate[string](`(async () => {
		mermaid.initialize({startOnLoad: false, securityLevel: 'strict'});
		try {
			const {svg} = await mermaid.render('diagram', `+string(srcJSON)+`);
			document.getElementById('out').innerHTML = svg;
			return 'ok';
		} catch (e) { return 'error: ' + e; }
	})()`, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, "ok", rendered, "Mermaid parses the export:\n%s", src.String())
	drawn, err := chromedp.Run(rctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#out svg text')].filter(e => {
		const s = getComputedStyle(e), box = e.getBBox();
		return s.display !== 'none' && s.visibility !== 'hidden' && parseFloat(s.opacity) > 0 && parseFloat(s.fontSize) > 0 && box.width > 0;
	}).map(e => e.textContent.split(/\s+/).join(' ').trim())`))
	require.NoError(t, err)
	all := strings.Join(drawn, "\n")
	for _, w := range want {
		require.Contains(t, all, w, "drawn as visible text (export:\n%s)", src.String())
	}
	for _, d := range drawn {
		require.False(t, strings.HasPrefix(d, "forged"), "a forged note: %q", d)
	}
}

// shown is a label as Mermaid must draw it: on one line, a control or
// format character as its escape, spaces collapsed.
func shown(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
	s, _ = domain.EvidenceText(s, math.MaxInt)
	return strings.Join(strings.Fields(s), " ")
}

func elide(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// mermaidAndBrowser finds Mermaid's script ($OPLEDGER_MERMAID_JS, which
// scripts/test.sh sets after npm pack mermaid) and a headless Chromium
// ($OPLEDGER_CHROMIUM, else chromium on PATH); without either the test is
// skipped loudly, or fails where scripts/test.sh said they are there.
func mermaidAndBrowser(t *testing.T) (script, browser string) {
	t.Helper()
	skip := func(what string, required bool) {
		msg := "\n" + strings.Repeat("!", 78) + "\n!!! MERMAID RENDERING TEST SKIPPED: " + what +
			"\n!!! (scripts/test.sh installs both). The Mermaid export was NOT rendered.\n" + strings.Repeat("!", 78)
		if required {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	script = os.Getenv("OPLEDGER_MERMAID_JS")
	if _, err := os.Stat(script); script == "" || err != nil {
		skip("no mermaid.min.js (set OPLEDGER_MERMAID_JS)", os.Getenv("OPLEDGER_REQUIRE_NPM_TOOLS") == "1")
	}
	browser = os.Getenv("OPLEDGER_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if browser != "" {
			break
		}
		if p, err := exec.LookPath(name); err == nil {
			browser = p
		}
	}
	if browser == "" {
		skip("no Chromium (set OPLEDGER_CHROMIUM)", os.Getenv("OPLEDGER_REQUIRE_BROWSER") == "1")
	}
	abs, err := filepath.Abs(script)
	require.NoError(t, err)
	return abs, browser
}

// chromium starts a headless Chromium with a fresh profile that may read
// local files, and returns its first tab.
func chromium(t *testing.T, path, dir string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("allow-file-access-from-files", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
	)
	alloc, cancel := chromedp.NewExecAllocator(context.WithoutCancel(t.Context()), opts...)
	t.Cleanup(cancel)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start %s", path)
	return ctx
}
