package domain

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// valid is a profile every rule accepts: a provider asked by key.
var valid = ProviderProfile{Name: "acme-pay", API: "meridian", KeyRetention: 7 * 24 * time.Hour, ReexecutesFailed: true,
	RetrieveByKey: true, KeyPolicy: KeyPerAttempt}

func TestProviderProfileValidateNamesEachField(t *testing.T) {
	require.NoError(t, valid.Validate())
	for _, c := range []struct {
		name  string
		edit  func(*ProviderProfile)
		field string
	}{
		{"no name", func(p *ProviderProfile) { p.Name = "" }, "name: is required"},
		{"name with a space", func(p *ProviderProfile) { p.Name = "acme pay" }, "name:"},
		{"name with NUL", func(p *ProviderProfile) { p.Name = "acme\x00" }, "name:"},
		{"name too long", func(p *ProviderProfile) { p.Name = strings.Repeat("a", MaxProfileNameLength+1) }, "name: is longer"},
		{"no api", func(p *ProviderProfile) { p.API = "" }, "api: is required"},
		{"negative retention", func(p *ProviderProfile) { p.KeyRetention = -time.Second }, "key_retention:"},
		{"retention past a year", func(p *ProviderProfile) { p.KeyRetention = MaxProviderKeyRetention + time.Hour }, "key_retention:"},
		{"replay and re-execute", func(p *ProviderProfile) { p.ReplaysSavedErrors = true }, "reexecutes_failed: contradicts"},
		{"bad reference field", func(p *ProviderProfile) { p.ReferenceField = "op id" }, "lookup_by_reference.metadata_key:"},
		{"reference field too long", func(p *ProviderProfile) { p.ReferenceField = strings.Repeat("k", MaxReferenceFieldLength+1) }, "lookup_by_reference.metadata_key:"},
		{"retrieve without retention", func(p *ProviderProfile) { p.KeyRetention = 0 }, "retrieve_by_key: needs a key_retention"},
		{"no key policy", func(p *ProviderProfile) { p.KeyPolicy = "" }, "key_policy:"},
		{"unknown key policy", func(p *ProviderProfile) { p.KeyPolicy = "per-call" }, "key_policy:"},
		{"reuse-first without re-execution", func(p *ProviderProfile) { p.ReexecutesFailed = false; p.KeyPolicy = KeyReuseFirst }, "key_policy: reuse-first needs"},
	} {
		p := valid
		c.edit(&p)
		err := p.Validate()
		require.ErrorIs(t, err, ErrInvalidProfile, c.name)
		require.ErrorContains(t, err, c.field, c.name)
		require.NotContains(t, err.Error(), "\x00", c.name)
	}

	// Every fault at once, each named.
	err := ProviderProfile{KeyRetention: -1, KeyPolicy: "x"}.Validate()
	for _, field := range []string{"name:", "api:", "key_retention:", "key_policy:"} {
		require.ErrorContains(t, err, field)
	}
	require.True(t, errors.Is(err, ErrInvalidProfile))
}

func TestProviderProfileCapabilities(t *testing.T) {
	none := ProviderProfile{Name: "blind", API: "x", KeyRetention: time.Hour, KeyPolicy: KeyPerAttempt}
	require.NoError(t, none.Validate())
	require.False(t, none.CanRead())
	require.False(t, none.LooksUpByReference())

	byRef := none
	byRef.ReferenceField = "operation_id"
	require.True(t, byRef.CanRead())
	require.True(t, byRef.LooksUpByReference())
	require.True(t, valid.CanRead())
	require.False(t, valid.LooksUpByReference())

	// A resend is safe only inside the retention, minus the margin.
	require.True(t, none.ResendIsSafe(0, 10*time.Minute))
	require.True(t, none.ResendIsSafe(49*time.Minute, 10*time.Minute))
	require.False(t, none.ResendIsSafe(50*time.Minute, 10*time.Minute))
	require.False(t, none.ResendIsSafe(-time.Second, 0), "a start in the future is not trusted")
	noDedup := none
	noDedup.KeyRetention = 0
	require.False(t, noDedup.ResendIsSafe(0, 0), "a provider that keeps no key is never resent to")
}

func TestEffectStateValid(t *testing.T) {
	for _, s := range []EffectState{EffectApplied, EffectNotApplied, EffectInProgress, EffectUnknown} {
		require.True(t, s.Valid(), s)
	}
	require.False(t, EffectState("succeeded").Valid())
	require.False(t, EffectState("").Valid())
}
