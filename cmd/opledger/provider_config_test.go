package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
)

// profileFrom resolves the profile the worker's provider settings choose
// from args and the environment.
func profileFrom(t *testing.T, args ...string) (domain.ProviderProfile, error) {
	t.Helper()
	f := newFlags("worker", "", io.Discard).Bind(settings.ProviderProfile, settings.ProviderProfileFile)
	_, ok := f.Parse(args)
	require.True(t, ok)
	return resolveProfile(f)
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

const acmeProfile = `{"name":"acme-pay","api":"meridian","key_retention":"72h","replays_saved_errors":false,
"reexecutes_failed":true,"lookup_by_reference":{"supported":false},"retrieve_by_key":true,"key_policy":"per-attempt"}`

// A profile by name, from a file, or the default; never both.
func TestProviderProfileResolution(t *testing.T) {
	t.Setenv("PROVIDER_PROFILE", "")
	t.Setenv("PROVIDER_PROFILE_FILE", "")

	p, err := profileFrom(t)
	require.NoError(t, err)
	require.Equal(t, provider.StripeV1, p)

	p, err = profileFrom(t, "--provider-profile", "meridian")
	require.NoError(t, err)
	require.Equal(t, provider.Meridian, p)

	file := writeFile(t, acmeProfile)
	p, err = profileFrom(t, "--provider-profile-file", file)
	require.NoError(t, err)
	require.Equal(t, "acme-pay", p.Name)
	require.True(t, p.RetrieveByKey)

	t.Setenv("PROVIDER_PROFILE_FILE", file)
	p, err = profileFrom(t)
	require.NoError(t, err)
	require.Equal(t, "acme-pay", p.Name, "the variable works as the flag")

	_, err = profileFrom(t, "--provider-profile", "stripe-v2")
	require.ErrorContains(t, err, "not both")
	t.Setenv("PROVIDER_PROFILE_FILE", "")

	_, err = profileFrom(t, "--provider-profile", "stripe-v3")
	require.ErrorContains(t, err, "--provider-profile")
	require.ErrorContains(t, err, "stripe-v1, stripe-v2, meridian")
	_, err = profileFrom(t, "--provider-profile-file", filepath.Join(t.TempDir(), "absent.json"))
	require.ErrorContains(t, err, "--provider-profile-file")
	t.Setenv("PROVIDER_PROFILE", "stripe-v3")
	_, err = profileFrom(t)
	require.ErrorContains(t, err, "PROVIDER_PROFILE", "a bad variable is named as the variable")
	t.Setenv("PROVIDER_PROFILE", "")
	_, err = profileFrom(t, "--provider-profile-file", writeFile(t, `{"name":"x"}`))
	require.ErrorContains(t, err, "field api is required")
}

// The commands refuse a bad provider setting with a line naming it.
func TestCommandsRefuseBadProviderSettings(t *testing.T) {
	t.Setenv("PROVIDER_PROFILE", "")
	t.Setenv("PROVIDER_PROFILE_FILE", "")
	t.Setenv("KAFKA_BROKERS", "")
	bad := writeFile(t, `{"name":"acme-pay","api":"meridian","key_retention":"72h","replays_saved_errors":true,
"reexecutes_failed":true,"lookup_by_reference":{"supported":false},"retrieve_by_key":true,"key_policy":"per-attempt"}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--provider-profile-file", bad}, "reexecutes_failed: contradicts"},
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--provider-profile", "stripe-v1", "--provider-profile-file", bad}, "not both"},
		{[]string{"serve", "--dev", "--tokens", "x", "--provider-url", "http://127.0.0.1:1", "--provider-profile", "paypal"}, "--provider-profile"},
		{[]string{"provider-sim", "--provider", "paypal"}, "--provider"},
		{[]string{"provider-sim", "--provider", "meridian", "--profile", "stripe-v1"}, "disagree"},
		{[]string{"audit", "provider-diff", "--provider", "paypal", "--provider-ledger", bad}, "no export reader"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), c.args, &stdout, &stderr)
		require.Equal(t, 1, code, "%v: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
}

// TestEnabledKindsNameKnownKindsOnly: OPLEDGER_ENABLE_KINDS takes the kinds
// there are (refund is always on), and names the setting for anything else.
func TestEnabledKindsNameKnownKindsOnly(t *testing.T) {
	kinds, err := parseEnabledKinds(" export-download, refund ,")
	require.NoError(t, err)
	require.Equal(t, []domain.OperationKind{domain.KindExportDownload}, kinds)
	kinds, err = parseEnabledKinds("")
	require.NoError(t, err)
	require.Empty(t, kinds)
	_, err = parseEnabledKinds("export-download,teleport")
	require.ErrorContains(t, err, "OPLEDGER_ENABLE_KINDS / --enable-kinds")
	require.ErrorContains(t, err, `"teleport"`)
}
