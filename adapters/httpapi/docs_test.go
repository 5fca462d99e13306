package httpapi_test

import (
	"os"
	"slices"
	"strings"
	"testing"

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
