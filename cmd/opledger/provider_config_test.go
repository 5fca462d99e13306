package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
)

func providerFlagsFrom(t *testing.T, args ...string) *providerFlags {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pf := addProviderFlags(fs)
	require.NoError(t, fs.Parse(args))
	return pf
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

	p, err := providerFlagsFrom(t).resolve()
	require.NoError(t, err)
	require.Equal(t, provider.StripeV1, p)

	p, err = providerFlagsFrom(t, "--provider-profile", "meridian").resolve()
	require.NoError(t, err)
	require.Equal(t, provider.Meridian, p)

	file := writeFile(t, acmeProfile)
	p, err = providerFlagsFrom(t, "--provider-profile-file", file).resolve()
	require.NoError(t, err)
	require.Equal(t, "acme-pay", p.Name)
	require.True(t, p.RetrieveByKey)

	t.Setenv("PROVIDER_PROFILE_FILE", file)
	p, err = providerFlagsFrom(t).resolve()
	require.NoError(t, err)
	require.Equal(t, "acme-pay", p.Name, "the variable works as the flag")

	_, err = providerFlagsFrom(t, "--provider-profile", "stripe-v2").resolve()
	require.ErrorContains(t, err, "not both")
	t.Setenv("PROVIDER_PROFILE_FILE", "")

	_, err = providerFlagsFrom(t, "--provider-profile", "stripe-v3").resolve()
	require.ErrorContains(t, err, "PROVIDER_PROFILE")
	require.ErrorContains(t, err, "stripe-v1, stripe-v2, meridian")
	_, err = providerFlagsFrom(t, "--provider-profile-file", filepath.Join(t.TempDir(), "absent.json")).resolve()
	require.ErrorContains(t, err, "PROVIDER_PROFILE_FILE")
	_, err = providerFlagsFrom(t, "--provider-profile-file", writeFile(t, `{"name":"x"}`)).resolve()
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
		{[]string{"serve", "--dev", "--tokens", "x", "--provider-url", "http://127.0.0.1:1", "--provider-profile", "paypal"}, "PROVIDER_PROFILE"},
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
