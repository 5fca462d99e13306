package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"opledger/adapters/httpapi"
)

// docs/monitoring holds what an operator loads into Prometheus and Grafana:
// alerts.yml (with its promtool unit tests, alerts_test.yml) and
// dashboard.json. These tests hold them to the code: every metric a query
// names is one serve exports, with labels it has; every alert has a
// severity, a summary and a runbook section in docs/operations.md; and
// promtool accepts the rules, passes their unit tests and parses every
// dashboard query.

const monitoringDir = "../../docs/monitoring"

// RequirePromtoolEnv makes a missing promtool fail the promtool tests
// instead of skipping them (scripts/test.sh sets it, with OPLEDGER_PROMTOOL).
const RequirePromtoolEnv = "OPLEDGER_REQUIRE_PROMTOOL"

// pendingContract are metrics PROTOCOL.md names that another change is
// adding to serve: the rules and the dashboard use them already. Each is
// allowed only while serve does not export it; once it does, the test
// says to remove it from here.
var pendingContract = map[string]string{}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"instance", "job"}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVar    = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
	promString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	// promMetric: the metric families the queries may name.
	promMetric   = regexp.MustCompile(`\b(opledger_[a-z0-9_]+|process_[a-z0-9_]+|go_[a-z0-9_]+)\b`)
	promSelector = regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\s*\{([^}]*)\}`)
	promMatcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// exportedMetrics are the metric families of serve's registry (the one
// httpapi.NewMetrics builds, which serve serves at /metrics) with their
// label names, read from the collectors' descriptions: a family appears
// whether or not it has a series yet.
func exportedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() {
		httpapi.NewMetrics().Registry().Describe(ch)
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		s := d.String()
		m := descName.FindStringSubmatch(s)
		require.NotNil(t, m, "a description without a name: %s", s)
		labels := slices.Clone(targetLabels)
		if c := descConst.FindStringSubmatch(s); c != nil && c[1] != "" {
			for _, pair := range strings.Split(c[1], ",") {
				labels = append(labels, strings.SplitN(pair, "=", 2)[0])
			}
		}
		if v := descVar.FindStringSubmatch(s); v != nil && v[1] != "" {
			for _, l := range strings.Split(v[1], ",") {
				labels = append(labels, strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"))
			}
		}
		out[m[1]] = labels
	}
	require.Contains(t, out, "opledger_executions", "the registry described serve's families")
	return out
}

// family is the exported family a name in a query belongs to: the name,
// or a histogram's _bucket/_sum/_count series (_bucket adds le).
func family(exported map[string][]string, name string) (string, []string, bool) {
	if labels, ok := exported[name]; ok {
		return name, labels, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if labels, ok := exported[base]; ok {
				if suffix == "_bucket" {
					labels = append(slices.Clone(labels), "le")
				}
				return base, labels, true
			}
		}
	}
	return "", nil, false
}

type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "alerts.yml"))
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	var rules []alertRule
	for _, g := range file.Groups {
		rules = append(rules, g.Rules...)
	}
	require.NotEmpty(t, rules)
	return rules
}

// dashboardQueries are the dashboard's panels' queries, each named by its
// panel.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	out := map[string]string{}
	for _, p := range dash.Panels {
		if p.Type != "row" {
			require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "panel %q, query %s", p.Title, tg.RefID)
			out[fmt.Sprintf("dashboard panel %q query %s", p.Title, tg.RefID)] = tg.Expr
		}
	}
	require.NotEmpty(t, out)
	return out
}

// TestMonitoringQueriesNameExportedMetrics: every metric the alert rules
// and the dashboard name is one serve exports, and every label a selector
// matches on is one that metric has (or a label Prometheus adds).
func TestMonitoringQueriesNameExportedMetrics(t *testing.T) {
	t.Parallel()
	exported := exportedMetrics(t)
	queries := dashboardQueries(t)
	for _, r := range alertRules(t) {
		queries["alert "+r.Alert+r.Record] = r.Expr
	}
	var problems []string
	pendingUsed := map[string]bool{}
	for where, expr := range sortedMap(queries) {
		text := promString.ReplaceAllString(expr, `""`)
		names := promMetric.FindAllString(text, -1)
		if len(names) == 0 {
			problems = append(problems, where+": names no metric: "+expr)
		}
		for _, name := range names {
			if _, _, ok := family(exported, name); !ok {
				if _, pending := pendingContract[name]; pending {
					pendingUsed[name] = true
					continue
				}
				problems = append(problems, where+": names "+name+", which serve does not export")
			}
		}
		for _, sel := range promSelector.FindAllStringSubmatch(text, -1) {
			_, labels, ok := family(exported, sel[1])
			if !ok {
				continue // a function's or an unknown name's braces: reported above
			}
			for _, m := range promMatcher.FindAllStringSubmatch(sel[2], -1) {
				if !slices.Contains(labels, m[1]) {
					problems = append(problems, fmt.Sprintf("%s: matches %s on label %q, which it lacks (it has %s)", where, sel[1], m[1], strings.Join(labels, ", ")))
				}
			}
		}
	}
	for name, who := range pendingContract {
		if _, _, ok := family(exported, name); ok {
			problems = append(problems, name+" is exported now: remove it from pendingContract")
		} else if pendingUsed[name] {
			t.Logf("NOT YET EXPORTED by serve, used by the rules or the dashboard: %s (PROTOCOL.md; %s)", name, who)
		}
	}
	require.Empty(t, problems, "\n"+strings.Join(problems, "\n"))
}

func sortedMap(m map[string]string) func(func(string, string) bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return func(yield func(string, string) bool) {
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// TestAlertsHaveSeverityAndRunbook: each alert says how urgent it is, what
// it means for refunds, and where its runbook is: a section of
// docs/operations.md that exists, and that says what not to do.
func TestAlertsHaveSeverityAndRunbook(t *testing.T) {
	t.Parallel()
	_, anchors := headings(t, "../../docs/operations.md")
	ops, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	var problems []string
	seen := map[string]bool{}
	for _, r := range alertRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			problems = append(problems, r.Alert+": named twice")
		}
		seen[r.Alert] = true
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			problems = append(problems, r.Alert+": severity "+r.Labels["severity"]+", want critical, warning or info")
		}
		if !strings.Contains(r.Annotations["summary"], "refund") && !strings.Contains(r.Annotations["summary"], "log") {
			problems = append(problems, r.Alert+": its summary does not say what it means for refunds")
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook"], "docs/operations.md#")
		switch {
		case !ok:
			problems = append(problems, r.Alert+": runbook "+r.Annotations["runbook"]+", want docs/operations.md#SECTION")
		case !anchors[anchor]:
			problems = append(problems, r.Alert+": runbook section #"+anchor+" is no heading of docs/operations.md")
		default:
			text := runbookSection(string(ops), anchor)
			for _, part := range []string{"**Check**", "**Shown by**", "**Do not**"} {
				if !strings.Contains(text, part) {
					problems = append(problems, r.Alert+": its runbook #"+anchor+" lacks "+part)
				}
			}
		}
	}
	require.Empty(t, problems, "\n"+strings.Join(problems, "\n"))
}

// runbookSection is the text under the heading whose anchor is a, up to
// the next heading of its level or above.
func runbookSection(doc, a string) string {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		m := headingLine.FindStringSubmatch(l)
		if m == nil || anchor(m[1]) != a {
			continue
		}
		level := strings.Index(l, " ")
		var b strings.Builder
		for _, next := range lines[i+1:] {
			if n := headingLine.FindStringSubmatch(next); n != nil && strings.Index(next, " ") <= level {
				break
			}
			b.WriteString(next + "\n")
		}
		return b.String()
	}
	return ""
}

// promtool finds promtool: OPLEDGER_PROMTOOL, else on PATH; skipped
// without one unless RequirePromtoolEnv says it must be there.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OPLEDGER_PROMTOOL"); p != "" {
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv(RequirePromtoolEnv) == "1" {
		t.Fatalf("no promtool (set OPLEDGER_PROMTOOL; scripts/test.sh extracts it from Debian's prometheus package)")
	}
	t.Skip("no promtool: the alert rules' promtool checks are SKIPPED (set OPLEDGER_PROMTOOL)")
	return ""
}

// TestAlertRulesPassPromtool: promtool accepts the rules, their unit tests
// pass, and it parses every dashboard query (each as a recording rule).
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	tool := promtool(t)
	run := func(args ...string) string {
		out, err := exec.Command(tool, args...).CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	require.Contains(t, run("check", "rules", filepath.Join(monitoringDir, "alerts.yml")), "SUCCESS")
	require.Contains(t, run("test", "rules", filepath.Join(monitoringDir, "alerts_test.yml")), "SUCCESS")

	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	i := 0
	for where, expr := range sortedMap(dashboardQueries(t)) {
		i++
		q, err := json.Marshal(expr) // a JSON string is a YAML string
		require.NoError(t, err)
		fmt.Fprintf(&b, "      # %s\n      - record: dashboard:query_%d\n        expr: %s\n", strings.ReplaceAll(where, "\n", " "), i, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard_queries.yml")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))
	require.Contains(t, run("check", "rules", file), fmt.Sprintf("SUCCESS: %d rules found", i))
}
