package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
)

func ringStates(t *testing.T, path string, now time.Time) map[string]captoken.KeyStatus {
	t.Helper()
	st, err := keysList(path, now)
	require.NoError(t, err)
	out := map[string]captoken.KeyStatus{}
	for _, k := range st {
		out[k.ID] = k
	}
	return out
}

// TestKeysRotation: new, list and retire on a ring directory and on a ring
// file, at chosen times: A active; B made to activate later is pending;
// after it A verifies; the active key cannot be retired; retiring A erases
// its seed; a retired key is reported so.
func TestKeysRotation(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	for name, path := range map[string]string{
		"directory": filepath.Join(t.TempDir(), "keys"),
		"file":      filepath.Join(t.TempDir(), "ring"),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "file" {
				require.NoError(t, os.WriteFile(path, nil, 0o600))
			}
			a, _, err := keysNew(path, t0, 0)
			require.NoError(t, err)
			require.Equal(t, captoken.KeyActive, ringStates(t, path, t0)[a.ID].State)
			b, _, err := keysNew(path, t0.Add(time.Hour), 10*time.Minute)
			require.NoError(t, err)
			st := ringStates(t, path, t0.Add(time.Hour))
			require.Equal(t, captoken.KeyActive, st[a.ID].State)
			require.Equal(t, captoken.KeyPending, st[b.ID].State)

			at := t0.Add(2 * time.Hour)
			st = ringStates(t, path, at)
			require.Equal(t, captoken.KeyVerifying, st[a.ID].State)
			require.Equal(t, b.Activates, st[a.ID].StoppedSigning)
			require.Equal(t, b.Activates.Add(captoken.DefaultRetention), st[a.ID].RetiresAt)
			require.Equal(t, captoken.KeyActive, st[b.ID].State)
			require.Equal(t, captoken.KeyRetired, ringStates(t, path, b.Activates.Add(captoken.DefaultRetention))[a.ID].State,
				"A retires by itself when its window ends")

			_, err = keysRetire(path, b.ID, at)
			require.ErrorContains(t, err, "is the active signing key")
			_, err = keysRetire(path, "0badc0de", at)
			require.ErrorContains(t, err, "no key")
			msg, err := keysRetire(path, a.ID, at)
			require.NoError(t, err)
			require.Contains(t, msg, "refused from now on")
			st = ringStates(t, path, at)
			require.Equal(t, captoken.KeyRetired, st[a.ID].State)
			require.False(t, st[a.ID].HasSeed(), "the seed is erased")
			require.True(t, st[b.ID].HasSeed())
			msg, err = keysRetire(path, a.ID, at.Add(time.Minute))
			require.NoError(t, err)
			require.Contains(t, msg, "already")

			// What serve loads agrees: B signs, A's tokens are refused.
			ring, err := captoken.LoadRing(path, 0)
			require.NoError(t, err)
			active, err := ring.Active(at)
			require.NoError(t, err)
			require.Equal(t, b.ID, active.ID)
		})
	}
}

// TestKeysCommand: the command itself, on a directory it makes.
func TestKeysCommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ring")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(t.Context(), []string{"keys", "new", "--signing-keys", dir}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "made key ")
	require.Equal(t, 0, run(t.Context(), []string{"keys", "new", "--signing-keys", dir, "--activate-in", "1h"}, &out, &errOut), errOut.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "key files are the owner's only")
	}

	out.Reset()
	require.Equal(t, 0, run(t.Context(), []string{"keys", "list", "--signing-keys", dir, "--json"}, &out, &errOut), errOut.String())
	var listed []map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, "pending", listed[1]["state"])
	require.NotContains(t, out.String(), "seed=")
	out.Reset()
	require.Equal(t, 0, run(t.Context(), []string{"keys", "list", "--signing-keys", dir}, &out, &errOut))
	require.Contains(t, out.String(), "pending")
	require.Equal(t, 1, run(t.Context(), []string{"keys", "retire", "--signing-keys", dir, "nope"}, &out, &errOut))
	require.Equal(t, 2, run(t.Context(), []string{"keys", "rotate"}, &out, &errOut))
	require.Equal(t, 1, run(t.Context(), []string{"keys", "list", "--signing-keys", filepath.Join(dir, "missing")}, &out, &errOut))
}

// keys new --if-none makes the ring's first key, and nothing once it has
// one (a container's first start, and every start after).
func TestKeysNewIfNone(t *testing.T) {
	t.Parallel()
	ring := filepath.Join(t.TempDir(), "keys")
	for i, want := range []string{"made key ", "holds 1 keys: none made"} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(t.Context(), []string{"keys", "new", "--if-none", "--signing-keys", ring}, &out, &errOut), errOut.String())
		require.Contains(t, out.String(), want, "run %d", i+1)
	}
	st, err := keysList(ring, time.Now())
	require.NoError(t, err)
	require.Len(t, st, 1)
}

// TestTokensCommand: 'tokens hash' prints the line of a token read from
// stdin; 'tokens new' prints a token and a line that authenticates it.
func TestTokensCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, runTokensFrom(strings.NewReader("worker-token-0123456789\n"), []string{"hash", "worker", "fleet-1"}, &out, &errOut), errOut.String())
	want, err := httpapi.TokenLine(httpapi.RoleWorker, "worker-token-0123456789", "fleet-1")
	require.NoError(t, err)
	require.Equal(t, want+"\n", out.String())

	out.Reset()
	require.Equal(t, 0, runTokensFrom(strings.NewReader(""), []string{"new", "operator", "olga"}, &out, &errOut), errOut.String())
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	require.Len(t, lines, 3, "the token, with what it is, on stderr")
	token, line := lines[1], strings.TrimSpace(out.String())
	require.Equal(t, 1, strings.Count(out.String(), "\n"), "stdout is the line alone: '>> tokens' appends just it")
	require.NotContains(t, out.String(), token)
	tokens, err := httpapi.ParseTokens(strings.NewReader(line+"\n"), "new")
	require.NoError(t, err)
	require.Empty(t, tokens.PlainLines())
	who, found := tokens.Authenticate(token)
	require.True(t, found)
	require.Equal(t, httpapi.Principal{Role: httpapi.RoleOperator, Name: "olga"}, who)

	errOut.Reset()
	require.Equal(t, 1, runTokensFrom(strings.NewReader("short\n"), []string{"hash", "worker"}, &out, &errOut))
	require.Contains(t, errOut.String(), "at least 16")
	require.NotContains(t, errOut.String(), "short\n")
	require.Equal(t, 1, runTokensFrom(strings.NewReader("worker-token-0123456789"), []string{"hash", "root"}, &out, &errOut))
	require.Equal(t, 1, runTokensFrom(strings.NewReader(""), []string{"hash", "worker"}, &out, &errOut))
	require.Equal(t, 2, runTokensFrom(strings.NewReader(""), []string{"hash"}, &out, &errOut))
}
