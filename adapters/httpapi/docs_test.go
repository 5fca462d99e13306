package httpapi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"opledger/adapters/httpapi"
)

// TestDocsMatchRoutes: docs/openapi.yaml describes exactly the endpoints the
// server registers, with a bearer requirement exactly where one is needed,
// and docs/api.md has a section or a line for each.
func TestDocsMatchRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	raw, err := os.ReadFile("../../docs/openapi.yaml")
	require.NoError(t, err)
	var spec struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &spec))
	require.True(t, strings.HasPrefix(spec.OpenAPI, "3.1"))

	documented := map[string]bool{}
	for path, ops := range spec.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = op["security"] == nil // nil: the global bearer requirement
		}
	}
	apiMD, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	served := map[string]bool{}
	for _, r := range e.api.Routes() {
		key := r.Method + " " + r.Path
		served[key] = len(r.Roles) > 0
		needsToken, found := documented[key]
		require.True(t, found, "%s is not in docs/openapi.yaml", key)
		require.Equal(t, len(r.Roles) > 0, needsToken, "%s: bearer requirement differs in docs/openapi.yaml", key)
		require.Contains(t, string(apiMD), "`"+key, "docs/api.md lacks %s", key)
		if len(r.Roles) > 0 && !slices.Equal(r.Roles, httpapi.Readers) {
			for _, role := range r.Roles {
				require.Contains(t, string(apiMD), "*"+string(role)+".*", "docs/api.md names no role for %s", key)
			}
		}
	}
	for key := range documented {
		_, found := served[key]
		require.True(t, found, "docs/openapi.yaml documents %s, which the server does not serve", key)
	}
}

// RequireNPMToolsEnv, set to 1 (scripts/test.sh sets it once npm installed
// its tools), turns a missing npm tool into a failure instead of a skip.
const RequireNPMToolsEnv = "OPLEDGER_REQUIRE_NPM_TOOLS"

// TestOpenAPILint: docs/openapi.yaml passes `redocly lint` (@redocly/cli,
// which scripts/test.sh installs with npm) with its recommended rules, as
// docs/redocly.yaml adjusts them: no error and no warning. A document our
// own YAML reading accepts can still say what it does not mean (a flow
// mapping whose comma makes a stray property).
func TestOpenAPILint(t *testing.T) {
	t.Parallel()
	redocly := os.Getenv("OPLEDGER_REDOCLY")
	if redocly == "" {
		if p, err := exec.LookPath("redocly"); err == nil {
			redocly = p
		}
	}
	if redocly == "" {
		msg := "\n" + strings.Repeat("!", 78) + "\n!!! OPENAPI LINT SKIPPED: no redocly (scripts/test.sh installs @redocly/cli with npm;\n" +
			"!!! or set OPLEDGER_REDOCLY=/path/to/redocly). docs/openapi.yaml was NOT linted.\n" + strings.Repeat("!", 78)
		if os.Getenv(RequireNPMToolsEnv) == "1" {
			t.Fatal(msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, redocly, "lint", "--config", "docs/redocly.yaml", "--format", "stylish", "docs/openapi.yaml")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "redocly lint docs/openapi.yaml:\n%s", out)
	require.NotRegexp(t, `(?m)^\s+\d+:\d+\s+(error|warning)\s`, string(out), "redocly lint docs/openapi.yaml:\n%s", out)
}
