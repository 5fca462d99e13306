package provider_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
)

const profileFile = `{
  "name": "acme-pay",
  "api": "meridian",
  "key_retention": "168h",
  "replays_saved_errors": false,
  "reexecutes_failed": true,
  "lookup_by_reference": {"supported": false},
  "retrieve_by_key": true,
  "key_policy": "per-attempt"
}`

func TestParseProfileFile(t *testing.T) {
	p, err := provider.ParseProfileFile([]byte(profileFile))
	require.NoError(t, err)
	require.Equal(t, domain.ProviderProfile{Name: "acme-pay", API: provider.APIMeridian, KeyRetention: 7 * 24 * time.Hour,
		ReexecutesFailed: true, RetrieveByKey: true, KeyPolicy: domain.KeyPerAttempt}, p)

	stripeLike := strings.NewReplacer(`"api": "meridian"`, `"api": "stripe"`,
		`{"supported": false}`, `{"supported": true, "metadata_key": "order_ref"}`,
		`"retrieve_by_key": true`, `"retrieve_by_key": false`).Replace(profileFile)
	p, err = provider.ParseProfileFile([]byte(stripeLike))
	require.NoError(t, err)
	require.Equal(t, "order_ref", p.ReferenceField)
	require.True(t, p.LooksUpByReference())
}

// Every field named, none optional, nothing else; each refusal names the
// field at fault.
func TestParseProfileFileRefusals(t *testing.T) {
	edit := func(old, new string) string {
		require.Contains(t, profileFile, old)
		return strings.Replace(profileFile, old, new, 1)
	}
	for _, c := range []struct{ name, file, want string }{
		{"not JSON", `name: acme`, "JSON"},
		{"two objects", profileFile + profileFile, "JSON"},
		{"unknown field", edit(`"name"`, `"colour": "red", "name"`), "colour"},
		{"duplicate field", edit(`"name": "acme-pay",`, `"name": "acme-pay", "name": "stripe-v1",`), "name: duplicate"},
		{"case variant", edit(`"api"`, `"API"`), "API"},
		{"missing name", edit(`"name": "acme-pay",`, ``), "field name is required"},
		{"null api", edit(`"meridian"`, `null`), "field api is required"},
		{"missing retention", edit(`"key_retention": "168h",`, ``), "field key_retention is required"},
		{"retention not a duration", edit(`"168h"`, `"7d"`), `field key_retention: "7d" is not a duration`},
		{"retention a number", edit(`"168h"`, `604800`), "key_retention"},
		{"missing replays", edit(`"replays_saved_errors": false,`, ``), "field replays_saved_errors is required"},
		{"replays a string", edit(`"replays_saved_errors": false`, `"replays_saved_errors": "no"`), "replays_saved_errors"},
		{"missing lookup", edit(`"lookup_by_reference": {"supported": false},`, ``), "field lookup_by_reference is required"},
		{"lookup without supported", edit(`{"supported": false}`, `{}`), "field lookup_by_reference.supported is required"},
		{"lookup supported without a key", edit(`{"supported": false}`, `{"supported": true}`), "metadata_key is required when supported"},
		{"lookup key while unsupported", edit(`{"supported": false}`, `{"supported": false, "metadata_key": "x"}`), "metadata_key: given, but supported is false"},
		{"missing key policy", edit(`,
  "key_policy": "per-attempt"`, ``), "field key_policy is required"},
		{"contradictory semantics", edit(`"replays_saved_errors": false`, `"replays_saved_errors": true`), "reexecutes_failed: contradicts"},
		{"unknown key policy", edit(`"per-attempt"`, `"per-call"`), "key_policy"},
		{"a built-in's name", edit(`"acme-pay"`, `"meridian"`), "field name: \"meridian\" is a built-in profile"},
		{"unknown api", edit(`"meridian"`, `"adyen"`), `field api: profile acme-pay: unknown api "adyen"`},
		{"a read the api has not", edit(`{"supported": false}`, `{"supported": true, "metadata_key": "operation_id"}`), "field api: profile acme-pay: api meridian offers no lookup"},
		{"hostile name", edit(`"acme-pay"`, `"acme\u0000pay"`), "name:"},
		{"too large", profileFile + strings.Repeat(" ", provider.MaxProfileFileBytes), "larger than"},
	} {
		_, err := provider.ParseProfileFile([]byte(c.file))
		require.ErrorIs(t, err, provider.ErrProfileFile, c.name)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
	}

	// All missing fields are named at once.
	_, err := provider.ParseProfileFile([]byte(`{}`))
	for _, f := range []string{"name", "api", "key_retention", "replays_saved_errors", "reexecutes_failed", "lookup_by_reference", "retrieve_by_key", "key_policy"} {
		require.ErrorContains(t, err, "field "+f+" is required")
	}
}

func TestBuiltinProfiles(t *testing.T) {
	require.Equal(t, []string{"stripe-v1", "stripe-v2", "meridian"}, provider.BuiltinProfileNames())
	for _, name := range provider.BuiltinProfileNames() {
		p, err := provider.ProfileNamed(name)
		require.NoError(t, err)
		require.NoError(t, p.Validate(), name)
		require.True(t, p.CanRead(), name)
	}
	require.True(t, provider.StripeV1.LooksUpByReference())
	require.False(t, provider.Meridian.LooksUpByReference())
	require.True(t, provider.Meridian.RetrieveByKey)
	_, err := provider.ProfileNamed("stripe-v3")
	require.ErrorContains(t, err, "stripe-v1, stripe-v2, meridian")
}
