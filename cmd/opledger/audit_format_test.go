package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/domain/audit"
	"opledger/eventstore/postgres/pgtest"
)

// termBuffer is a buffer that says it is a terminal: what a person at one
// would see.
type termBuffer struct{ bytes.Buffer }

func (*termBuffer) Terminal() bool { return true }

// `opledger audit replay` fits 120 columns by default, keeps the wide table
// under --wide, and prints JSON and the Mermaid sequence diagram; `audit
// verify` draws progress on a terminal and none when piped.
func TestAuditReplayFormatsAndVerifyProgress(t *testing.T) {
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1})
	require.NoError(t, err)
	defer w.Close()
	_, err = harness.RunStory(t.Context(), w, io.Discard, nil)
	require.NoError(t, err)

	cli := func(stderr io.Writer, args ...string) (int, string) {
		var stdout bytes.Buffer
		code := run(context.WithoutCancel(t.Context()), append(args, "--database-url", url, "--store-schema", schema), &stdout, stderr)
		return code, stdout.String()
	}
	var errs bytes.Buffer
	code, out := cli(&errs, "audit", "replay", "OP-4471")
	require.Equal(t, 0, code, errs.String())
	for _, line := range strings.Split(out, "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), audit.DefaultTableWidth, "line %q", line)
	}
	for _, event := range []string{"LeaseLapsed", "Reconciled", "PresentationRejected", "replay suspected"} {
		require.Contains(t, out, event)
	}

	code, out = cli(&errs, "audit", "replay", "OP-4471", "--wide")
	require.Equal(t, 0, code, errs.String())
	widest := 0
	for _, line := range strings.Split(out, "\n") {
		widest = max(widest, utf8.RuneCountInString(line))
	}
	require.Greater(t, widest, 200, "--wide keeps every field on one line")

	code, out = cli(&errs, "audit", "replay", "OP-4471", "--width", "90")
	require.Equal(t, 0, code, errs.String())
	for _, line := range strings.Split(out, "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(line), 90, "line %q", line)
	}

	code, out = cli(&errs, "audit", "replay", "OP-4471", "--format", "mermaid")
	require.Equal(t, 0, code, errs.String())
	require.True(t, strings.HasPrefix(out, "sequenceDiagram\n"), out)
	require.Contains(t, out, "participant provider as provider")
	require.Contains(t, out, "replay suspected")

	code, out = cli(&errs, "audit", "replay", "OP-4471", "--format", "json")
	require.Equal(t, 0, code, errs.String())
	var doc audit.TimelineJSON
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, doc.Events, len(doc.Rows))
	code, out2 := cli(&errs, "audit", "replay", "OP-4471", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, out, out2, "--json is --format json")

	errs.Reset()
	code, _ = cli(&errs, "audit", "replay", "OP-4471", "--format", "yaml")
	require.Equal(t, 1, code)
	require.Contains(t, errs.String(), "--format")

	// Piped: the report and nothing else.
	errs.Reset()
	code, out = cli(&errs, "audit", "verify")
	require.Equal(t, 0, code, errs.String())
	require.NotContains(t, errs.String(), "events verified")
	require.NotEmpty(t, out)
	// On a terminal: a progress line on stderr, the report unchanged on stdout.
	var term termBuffer
	code, outTerm := cli(&term, "audit", "verify")
	require.Equal(t, 0, code, term.String())
	require.Equal(t, out, outTerm)
	require.Contains(t, term.String(), "events verified")
	require.Contains(t, term.String(), "100%", "the PostgreSQL store's head gives the end")
	require.Contains(t, term.String(), "done in")
}

// The progress line: counts, rate, share and ETA by the log's ordinals,
// redrawn at most every progressEvery, silent off a terminal.
func TestProgressLine(t *testing.T) {
	require.Nil(t, newProgress(&bytes.Buffer{}, "events"), "not a terminal: no progress")
	var nilProgress *progress
	nilProgress.add(1, nil) // a nil progress does nothing
	nilProgress.finish()

	var term termBuffer
	p := newProgress(&term, "dead letters")
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	p.start, p.now = now, func() time.Time { return now }
	p.setTotal(4)
	now = now.Add(time.Second)
	p.add(1, nil)
	require.Contains(t, term.String(), "1 dead letters · 1/s · 25% · ETA 3s")
	before := term.Len()
	p.add(1, nil) // within progressEvery: not redrawn
	require.Equal(t, before, term.Len())
	now = now.Add(time.Second)
	p.add(2, nil)
	p.finish()
	require.True(t, strings.HasSuffix(term.String(), "4 dead letters · 2/s · 100% · done in 2s\n"), term.String())
	require.Equal(t, "1,234,567", thousands(1234567))
}
