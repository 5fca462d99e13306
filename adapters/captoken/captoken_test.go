package captoken_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/domain"
)

var (
	seedA = bytes.Repeat([]byte{7}, captoken.SeedSize)
	seedB = bytes.Repeat([]byte{9}, captoken.SeedSize)
	exp   = time.Date(2026, 11, 26, 14, 17, 10, 123456789, time.UTC)
)

func issued() domain.CapabilityIssued {
	return domain.CapabilityIssued{CapabilityID: "CAP-4471.1", DecisionID: "DEC-4471.1", Attempt: 1, ExpiresAt: exp}
}

func signer(t *testing.T, seed []byte) *captoken.Signer {
	t.Helper()
	s, err := captoken.NewSigner(seed)
	require.NoError(t, err)
	return s
}

func TestRoundTripAndDeterminism(t *testing.T) {
	t.Parallel()
	s := signer(t, seedA)
	tok, err := s.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	again, err := s.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	require.Equal(t, tok, again, "Ed25519 is deterministic: one capability, one token")

	c, err := s.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, captoken.Claims{Version: captoken.Version, KeyID: s.KeyID(), CapabilityID: "CAP-4471.1", OperationID: "OP-4471", Attempt: 1,
		ExpiresAt: exp.Truncate(time.Second)}, c, "the expiry to the second, rounded down")
	head, _, _ := strings.Cut(tok, ".")
	wire, err := base64.RawURLEncoding.DecodeString(head)
	require.NoError(t, err)
	require.Contains(t, string(wire), `"exp":"2026-11-26T14:17:10Z"`, "no fractional seconds")

	// A token of an earlier build, its expiry with nanoseconds, still verifies.
	old, err := s.Sign(captoken.Claims{Version: captoken.Version, CapabilityID: "CAP-4471.1", OperationID: "OP-4471", Attempt: 1, ExpiresAt: exp})
	require.NoError(t, err)
	earlier, err := s.Verify(old)
	require.NoError(t, err)
	require.Equal(t, exp, earlier.ExpiresAt)

	// A verifier holding only the public key accepts it too.
	v, err := captoken.NewVerifier(s.PublicKey())
	require.NoError(t, err)
	c2, err := v.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, c, c2)
	require.Equal(t, s.KeyID(), v.KeyID())

	// The payload is readable JSON with a version field and the key's id.
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	require.NoError(t, err)
	require.Equal(t, `{"v":2,"kid":"`+s.KeyID()+`","cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10Z"}`, string(payload))
}

// TestAlteredAndForgedTokens: every change to a genuine token, and every
// token made with another key, fails with ErrBadSignature; text that is not
// a token fails with ErrMalformed.
func TestAlteredAndForgedTokens(t *testing.T) {
	t.Parallel()
	s := signer(t, seedA)
	tok, err := s.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	payloadPart, sigPart, _ := strings.Cut(tok, ".")

	reencode := func(edit func(m map[string]any)) string {
		raw, err := base64.RawURLEncoding.DecodeString(payloadPart)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		edit(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(out) + "." + sigPart
	}
	forged, err := signer(t, seedB).TokenFor("OP-4471", issued())
	require.NoError(t, err)

	bad := map[string]string{
		"attempt raised":        reencode(func(m map[string]any) { m["att"] = 2 }),
		"operation swapped":     reencode(func(m map[string]any) { m["op"] = "OP-9999" }),
		"capability swapped":    reencode(func(m map[string]any) { m["cap"] = "CAP-4471.2" }),
		"expiry extended":       reencode(func(m map[string]any) { m["exp"] = "2030-01-01T00:00:00Z" }),
		"signed by another key": forged,
		"signature flipped":     payloadPart + "." + flip(sigPart),
	}
	for name, tok := range bad {
		_, err := s.Verify(tok)
		require.ErrorIs(t, err, captoken.ErrBadSignature, name)
		require.NotErrorIs(t, err, captoken.ErrMalformed, name)
	}

	malformed := map[string]string{
		"empty":              "",
		"no dot":             payloadPart + sigPart,
		"three parts":        tok + ".x",
		"payload not base64": "!!!." + sigPart,
		"short signature":    payloadPart + "." + base64.RawURLEncoding.EncodeToString([]byte("short")),
		"too long":           strings.Repeat("a", captoken.MaxTokenLength+1),
	}
	for name, tok := range malformed {
		_, err := s.Verify(tok)
		require.ErrorIs(t, err, captoken.ErrMalformed, name)
		require.NotErrorIs(t, err, captoken.ErrBadSignature, name)
	}
}

func flip(sig string) string {
	raw, _ := base64.RawURLEncoding.DecodeString(sig)
	raw[0] ^= 1
	return base64.RawURLEncoding.EncodeToString(raw)
}

// TestParseUnverified reads a forged token's claims for the evidence, and
// refuses what is not a token.
func TestParseUnverified(t *testing.T) {
	t.Parallel()
	forged, err := signer(t, seedB).TokenFor("OP-4471", issued())
	require.NoError(t, err)
	c, err := captoken.ParseUnverified(forged)
	require.NoError(t, err)
	require.Equal(t, domain.CapabilityID("CAP-4471.1"), c.CapabilityID)
	_, err = captoken.ParseUnverified("garbage")
	require.ErrorIs(t, err, captoken.ErrMalformed)
	require.Len(t, captoken.Fingerprint("garbage"), 16)
}

func TestSignRefusesIncompleteClaims(t *testing.T) {
	t.Parallel()
	s := signer(t, seedA)
	for name, c := range map[string]captoken.Claims{
		"no capability":  {OperationID: "OP-1", Attempt: 1, ExpiresAt: exp},
		"bad operation":  {CapabilityID: "CAP-1.1", OperationID: "4471", Attempt: 1, ExpiresAt: exp},
		"attempt 0":      {CapabilityID: "CAP-1.1", OperationID: "OP-1", ExpiresAt: exp},
		"no expiry":      {CapabilityID: "CAP-1.1", OperationID: "OP-1", Attempt: 1},
		"future version": {Version: 3, CapabilityID: "CAP-1.1", OperationID: "OP-1", Attempt: 1, ExpiresAt: exp},
		"old version":    {Version: 1, CapabilityID: "CAP-1.1", OperationID: "OP-1", Attempt: 1, ExpiresAt: exp},
	} {
		_, err := s.Sign(c)
		require.Error(t, err, name)
	}
}

func TestLoadSigner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	secret := base64.StdEncoding.EncodeToString(seedA)

	s, err := captoken.LoadSigner(write("good.key", secret+"\n"))
	require.NoError(t, err)
	require.Equal(t, signer(t, seedA).KeyID(), s.KeyID())
	require.False(t, s.Ephemeral())
	require.NotContains(t, s.String(), secret)

	s2, err := captoken.LoadSigner(write("url.key", "  "+base64.RawURLEncoding.EncodeToString(seedA)+"  "))
	require.NoError(t, err)
	require.Equal(t, s.KeyID(), s2.KeyID())

	gen, err := captoken.GenerateSeed()
	require.NoError(t, err)
	_, err = captoken.LoadSigner(write("gen.key", gen))
	require.NoError(t, err)

	short := base64.StdEncoding.EncodeToString(seedA[:16])
	cases := map[string]struct{ path, want string }{
		"missing":    {filepath.Join(dir, "nope.key"), "does not exist"},
		"empty":      {write("empty.key", "\n"), "is empty"},
		"not base64": {write("junk.key", "not a key at all!"), "is not base64"},
		"wrong size": {write("short.key", short), "decodes to 16 bytes"},
		"no path":    {"", captoken.EnvVar},
	}
	for name, c := range cases {
		_, err := captoken.LoadSigner(c.path)
		require.ErrorContains(t, err, c.want, name)
		require.NotContains(t, err.Error(), short, name)
		require.NotContains(t, err.Error(), "not a key at all", name)
	}
}

func TestEphemeral(t *testing.T) {
	t.Parallel()
	a, err := captoken.NewEphemeral()
	require.NoError(t, err)
	b, err := captoken.NewEphemeral()
	require.NoError(t, err)
	require.True(t, a.Ephemeral())
	require.NotEqual(t, a.KeyID(), b.KeyID())
	tok, err := a.TokenFor("OP-1", issued())
	require.NoError(t, err)
	_, err = b.Verify(tok)
	require.ErrorIs(t, err, captoken.ErrBadSignature)
}
