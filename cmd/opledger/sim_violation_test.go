//go:build simbugs

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSimCommandReportsAViolation: with a bug planted (a -tags simbugs
// build), the sweep exits 1, prints the shrunk schedule's timeline and the
// one-line command that replays it, and the replay fails the same way.
func TestSimCommandReportsAViolation(t *testing.T) {
	var out, errs bytes.Buffer
	code := run(t.Context(), []string{"sim", "--seed", "1", "--schedules", "100", "--ops", "2", "--plant", "skip-operation-barrier", "--parallel", "1"}, &out, &errs)
	require.Equal(t, 1, code, errs.String())
	var sum map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &sum))
	require.NotZero(t, sum["violations"])
	_, line, found := strings.Cut(errs.String(), "\nreplay: ")
	require.True(t, found, "no replay line: %s", errs.String())
	line, _, _ = strings.Cut(line, "\n")
	// A planted bug replays only in a simbugs binary: the line says so.
	prefix := "go run -tags simbugs ./cmd/opledger "
	require.True(t, strings.HasPrefix(line, prefix), line)
	args := strings.Fields(strings.TrimPrefix(line, prefix))
	require.Equal(t, "sim", args[0], line)

	out.Reset()
	errs.Reset()
	require.Equal(t, 1, run(t.Context(), args, &out, &errs), "the replay fails too: %s", out.String())
	require.Contains(t, out.String(), "VIOLATION")
}
