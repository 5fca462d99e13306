package captoken_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/domain"
	"opledger/domain/clock"
)

var t0 = time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)

// newKey makes a key created at created and signing from activates.
func newKey(t *testing.T, created, activates time.Time) captoken.Key {
	t.Helper()
	k, err := captoken.NewKey(created, activates)
	require.NoError(t, err)
	return k
}

// writeRingDir writes each key to DIR/<id>.key, as `opledger keys new` does.
func writeRingDir(t *testing.T, dir string, keys ...captoken.Key) {
	t.Helper()
	for _, k := range keys {
		require.NoError(t, captoken.WriteKeyFile(filepath.Join(dir, k.ID+captoken.KeyFileSuffix), "", []captoken.Key{k}))
	}
}

func tokenKid(t *testing.T, tok string) string {
	t.Helper()
	c, err := captoken.ParseUnverified(tok)
	require.NoError(t, err)
	return c.KeyID
}

// TestRotationKeepsOutstandingCapabilities: a capability issued under key A
// still verifies after the ring rotated to B, for the retention after A
// stopped signing; then A is retired and its tokens are refused.
func TestRotationKeepsOutstandingCapabilities(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(t0)
	a := newKey(t, t0, t0)
	writeRingDir(t, dir, a)
	keys, err := captoken.OpenKeys(dir, 0, clk)
	require.NoError(t, err)
	require.Equal(t, a.ID, keys.KeyID())
	underA, err := keys.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	require.Equal(t, a.ID, tokenKid(t, underA))

	// B is made to activate in ten minutes, and reloaded at once.
	clk.Advance(time.Hour)
	b := newKey(t, clk.Now(), clk.Now().Add(10*time.Minute))
	writeRingDir(t, dir, b)
	require.NoError(t, keys.Reload())
	pending, err := keys.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	require.Equal(t, a.ID, tokenKid(t, pending), "B is pending: A still signs")
	require.Equal(t, []captoken.KeyState{captoken.KeyActive, captoken.KeyPending}, states(keys.Status()))

	clk.Advance(10 * time.Minute)
	underB, err := keys.TokenFor("OP-4471", issued())
	require.NoError(t, err)
	require.Equal(t, b.ID, tokenKid(t, underB), "B signs from its activation")
	_, err = keys.Verify(underA)
	require.NoError(t, err, "A verifies after it stopped signing")
	st := keys.Status()
	require.Equal(t, []captoken.KeyState{captoken.KeyVerifying, captoken.KeyActive}, states(st))
	require.Equal(t, b.Activates, st[0].StoppedSigning)
	require.Equal(t, b.Activates.Add(captoken.DefaultRetention), st[0].RetiresAt)
	require.GreaterOrEqual(t, captoken.DefaultRetention, domain.MaxCapabilityTTL)

	clk.Advance(captoken.DefaultRetention - time.Second)
	_, err = keys.Verify(underA)
	require.NoError(t, err, "one second before its window ends A still verifies")
	clk.Advance(time.Second)
	_, err = keys.Verify(underA)
	require.ErrorIs(t, err, captoken.ErrRetiredKey)
	require.ErrorIs(t, err, captoken.ErrBadSignature, "refused as any bad signature: capability.invalid")
	require.Equal(t, []captoken.KeyState{captoken.KeyRetired, captoken.KeyActive}, states(keys.Status()))
	_, err = keys.Verify(underB)
	require.NoError(t, err)
}

// TestRetireCutsTheWindowShort: an operator retires A (compromised): its
// tokens are refused at once, and the file no longer holds its seed.
func TestRetireCutsTheWindowShort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := clock.NewManual(t0)
	a := newKey(t, t0, t0)
	writeRingDir(t, dir, a)
	keys, err := captoken.OpenKeys(dir, 0, clk)
	require.NoError(t, err)
	underA, err := keys.TokenFor("OP-4471", issued())
	require.NoError(t, err)

	clk.Advance(time.Minute)
	b := newKey(t, clk.Now(), clk.Now())
	writeRingDir(t, dir, b, a.Retire(clk.Now()))
	raw, err := os.ReadFile(filepath.Join(dir, a.ID+".key"))
	require.NoError(t, err)
	require.NotContains(t, string(raw), "seed=")
	require.NoError(t, keys.Reload())
	_, err = keys.Verify(underA)
	require.ErrorIs(t, err, captoken.ErrRetiredKey)
	require.Equal(t, b.ID, keys.KeyID())
}

// TestUnknownKeyAndVersion1: a token naming a key the ring lacks is
// ErrUnknownKey; a version 1 token (no kid, before rings) verifies against
// the ring's keys while they verify.
func TestUnknownKeyAndVersion1(t *testing.T) {
	t.Parallel()
	ring, err := captoken.NewRing([]captoken.Key{newKey(t, t0, t0)}, 0, "test")
	require.NoError(t, err)
	forged, err := signer(t, seedB).TokenFor("OP-4471", issued())
	require.NoError(t, err)
	_, err = ring.Verify(t0, forged)
	require.ErrorIs(t, err, captoken.ErrUnknownKey)
	require.ErrorIs(t, err, captoken.ErrBadSignature)

	// A v1 token of seedA, verified by the one-key ring of seedA.
	payload := `{"v":1,"cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10.123456789Z"}`
	v1 := signRaw(seedA, payload)
	single := captoken.SingleKeyRing(signer(t, seedA), "single")
	c, err := single.Verify(t0, v1)
	require.NoError(t, err)
	require.Equal(t, 1, c.Version)
	require.Empty(t, c.KeyID)
	_, err = ring.Verify(t0, v1)
	require.ErrorIs(t, err, captoken.ErrBadSignature, "another ring's v1 token")
}

// signRaw signs any payload text with seed, as no genuine signer would.
func signRaw(seed []byte, payload string) string {
	sig := ed25519.Sign(ed25519.NewKeyFromSeed(seed), []byte(captoken.Domain+payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestSignedButNotCanonical: even under a valid signature, a payload is
// read only in the exact form the signer writes: case-variant or repeated
// names, reordering and whitespace are malformed.
func TestSignedButNotCanonical(t *testing.T) {
	t.Parallel()
	s := signer(t, seedA)
	kid := s.KeyID()
	for name, p := range map[string]string{
		"case variant":  `{"v":2,"kid":"` + kid + `","cap":"CAP-4471.1","op":"OP-4471","Att":1,"exp":"2026-11-26T14:17:10Z"}`,
		"duplicate":     `{"v":2,"kid":"` + kid + `","cap":"CAP-4471.1","op":"OP-4471","att":1,"att":2,"exp":"2026-11-26T14:17:10Z"}`,
		"reordered":     `{"kid":"` + kid + `","v":2,"cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10Z"}`,
		"whitespace":    `{"v":2, "kid":"` + kid + `","cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10Z"}`,
		"trailing":      `{"v":2,"kid":"` + kid + `","cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10Z"}{}`,
		"v2 without id": `{"v":2,"cap":"CAP-4471.1","op":"OP-4471","att":1,"exp":"2026-11-26T14:17:10Z"}`,
	} {
		_, err := s.Verify(signRaw(seedA, p))
		require.ErrorIs(t, err, captoken.ErrMalformed, name)
	}
}

func states(st []captoken.KeyStatus) []captoken.KeyState {
	out := make([]captoken.KeyState, len(st))
	for i, s := range st {
		out[i] = s.State
	}
	return out
}

// TestParseKeysIsStrict: every malformed line is an error naming the line
// and what is wrong, never the seed.
func TestParseKeysIsStrict(t *testing.T) {
	t.Parallel()
	k := newKey(t, t0, t0)
	line := k.Line()
	seed := line[strings.Index(line, "seed=")+5:]
	keys, err := captoken.ParseKeys(strings.NewReader("# ring\n\n"+line+"  # the first key\n"), "ring")
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, k.ID, keys[0].ID)
	require.True(t, keys[0].HasSeed())
	retired, err := captoken.ParseKeys(strings.NewReader(k.Retire(t0.Add(time.Hour)).Line()), "ring")
	require.NoError(t, err)
	require.False(t, retired[0].HasSeed())

	other := newKey(t, t0, t0)
	idA := "id=" + k.ID
	bad := map[string]string{
		line + " colour=blue":                                     `ring:1: unknown field "colour"`,
		line + " " + idA:                                          "ring:1: field id given twice",
		strings.Replace(line, idA, "ID="+k.ID, 1):                 `ring:1: unknown field "ID"`,
		strings.Replace(line, idA, "id="+other.ID, 1):             "is not the id of its seed",
		strings.Replace(line, idA+" ", "", 1):                     "ring:1: no id field",
		strings.Replace(line, "created=", "created=yesterday", 1): `ring:1: created "yesterday`,
		strings.Replace(line, seed, seed[:20], 1):                 "ring:1: seed: want the standard base64",
		strings.Replace(line, " seed="+seed, "", 1):               "only a retired key may lack its seed",
		"# ok\n" + line + "\x00":                                  "ring:2: line holds a NUL character",
		line + " activates=2020-01-01T00:00:00Z":                  "activates is before created",
		line + " note":                                            `field "note": want name=value`,
		"\xff" + line:                                             "invalid UTF-8",
	}
	for text, want := range bad {
		_, err := captoken.ParseKeys(strings.NewReader(text), "ring")
		require.ErrorContains(t, err, want, text)
		require.NotContains(t, err.Error(), seed[:20], "errors never show a seed")
	}
	_, err = captoken.NewRing([]captoken.Key{k, k}, 0, "ring")
	require.ErrorContains(t, err, "twice")
	_, err = captoken.NewRing(nil, 0, "ring")
	require.ErrorContains(t, err, "no key")
}

// TestRingFileAndDirectory: one file of lines and a directory of key files
// read alike; a ring without a key that signs now is refused.
func TestRingFileAndDirectory(t *testing.T) {
	t.Parallel()
	a, b := newKey(t, t0, t0), newKey(t, t0.Add(time.Hour), t0.Add(time.Hour))
	file := filepath.Join(t.TempDir(), "ring")
	require.NoError(t, captoken.WriteKeyFile(file, "# opledger signing keys\n", []captoken.Key{b, a}))
	info, err := os.Stat(file)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	keys, err := captoken.OpenKeys(file, 0, clock.NewManual(t0.Add(2*time.Hour)))
	require.NoError(t, err)
	require.Equal(t, b.ID, keys.KeyID())

	dir := t.TempDir()
	writeRingDir(t, dir, a, b)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not a key"), 0o600))
	keys, err = captoken.OpenKeys(dir, 0, clock.NewManual(t0.Add(2*time.Hour)))
	require.NoError(t, err)
	require.Equal(t, b.ID, keys.KeyID())

	_, err = captoken.OpenKeys(dir, 0, clock.NewManual(t0.Add(-time.Hour)))
	require.ErrorIs(t, err, captoken.ErrNoActiveKey, "before any key activates")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "two.key"), []byte(a.Line()+"\n"+b.Line()+"\n"), 0o600))
	_, err = captoken.OpenKeys(dir, 0, clock.NewManual(t0))
	require.ErrorContains(t, err, "holds 2 keys")

	// A failed reload keeps the ring in use.
	require.NoError(t, os.Remove(filepath.Join(dir, "two.key")))
	keys, err = captoken.OpenKeys(dir, 0, clock.NewManual(t0.Add(2*time.Hour)))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.key"), []byte("id=nope\n"), 0o600))
	require.ErrorContains(t, keys.Reload(), "bad.key:1")
	require.Equal(t, b.ID, keys.KeyID())
}
