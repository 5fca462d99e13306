package provider_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
)

// TestEachAPIDescribesItselfOnce: every built-in profile speaks an API
// opledger has, under a name no other profile takes; each API has a wire
// adapter for its profiles and an export reader, by API name and by
// profile name.
func TestEachAPIDescribesItselfOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range provider.BuiltinProfiles() {
		require.False(t, seen[p.Name], "profile %s listed twice", p.Name)
		seen[p.Name] = true
		require.Contains(t, provider.APIs, p.API, p.Name)
		require.NoError(t, p.Validate(), p.Name)
		_, err := provider.New(provider.Config{Profile: p, BaseURL: "http://127.0.0.1:1"})
		require.NoError(t, err, "a wire adapter for %s", p.Name)
		_, err = provider.ExportReader(p.Name, strings.NewReader(""))
		require.NoError(t, err, "an export reader for %s", p.Name)
	}
	for _, api := range provider.APIs {
		_, err := provider.ExportReader(api, strings.NewReader(""))
		require.NoError(t, err, "an export reader for api %s", api)
	}
	_, err := provider.ExportReader("nope", strings.NewReader(""))
	require.ErrorContains(t, err, "want a profile (stripe-v1, stripe-v2, meridian) or an api (stripe, meridian)")
}
