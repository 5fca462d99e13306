package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain/strictjson"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// The rows of issue 12 ("a newcomer's first hour") that are the commands'
// own behaviour, retried as written.

func cli3(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.WithoutCancel(t.Context()), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// An unreachable database is one line: the server without its password,
// where its URL came from, the cause once.
func TestUnreachableDatabaseIsOneLine(t *testing.T) {
	t.Parallel()
	dead := "postgres://ops:s3cret@" + freeAddr(t) + "/postgres?sslmode=prefer"
	for _, args := range [][]string{
		{"migrate", "--database-url", dead},
		{"audit", "verify", "--database-url", dead},
		{"dlq", "list", "--database-url", dead},
		{"set-aside", "list", "--database-url", dead},
		{"projections", "list", "--database-url", dead},
	} {
		code, _, stderr := cli3(t, args...)
		require.Equal(t, 1, code, "%v", args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %s", args, stderr)
		require.Contains(t, stderr, "cannot connect to PostgreSQL at postgres://ops:xxxxx@", "%v", args)
		require.Contains(t, stderr, "(--database-url): dial tcp", "%v", args)
		require.Equal(t, 1, strings.Count(stderr, "connection refused"), "%v: the cause once: %s", args, stderr)
		require.NotContains(t, stderr, "s3cret")
	}
}

// --dev's warning comes once serve's files have loaded: a bad tokens file
// is the only thing said.
func TestDevWarningAfterTheFiles(t *testing.T) {
	t.Parallel()
	code, _, stderr := cli3(t, "serve", "--dev", "--tokens", filepath.Join(t.TempDir(), "absent"), "--provider-url", "http://127.0.0.1:1")
	require.Equal(t, 1, code)
	require.NotContains(t, stderr, "DEV MODE")
	require.Contains(t, stderr, "opledger serve: token file: open ")
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

// migrate takes all three schema flags and says what it did in words; a
// command that finds a schema missing names the migrate command to run,
// with the schema flag it was given.
func TestMigrateSaysWhatItDid(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	es, rm, tr := schema+"_es", schema+"_rm", schema+"_tr"
	t.Cleanup(func() { dropSchemas(url, es, rm, tr) })
	args := []string{"migrate", "--database-url", url, "--store-schema", es, "--schema", rm, "--transport-schema", tr}

	code, _, stderr := cli3(t, "audit", "replay", "OP-4471", "--database-url", url, "--store-schema", es)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "never migrated: run 'opledger migrate --database-url '"+url+"' --store-schema "+es+"'")

	all, err := postgres.Migrations()
	require.NoError(t, err)
	names := make([]string, len(all))
	for i, m := range all {
		names[i] = fmt.Sprintf("%03d_%s", m.Version, m.Name)
	}
	latest := fmt.Sprint(all[len(all)-1].Version)

	code, out, stderr := cli3(t, args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "event store schema "+es+": applied "+strings.Join(names, ", ")+"; at version "+latest+"\n")
	require.Contains(t, out, "read models schema "+rm+": applied 001_read_models, ")
	require.Contains(t, out, "transport schema "+tr+": applied 001_transport, ")
	require.NotContains(t, out, "[")
	code, out, stderr = cli3(t, args...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "event store schema "+es+": up to date at version "+latest+"\n")
	require.Contains(t, out, "transport schema "+tr+": up to date at version ")

	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, tr).Scan(&n))
	require.Equal(t, 1, n, "--transport-schema names the schema migrate made")
}

// The JSON logs write durations as text and each key once per line.
func TestJSONLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(newJSONHandler(&buf, slog.LevelInfo)).With("worker", "w-1")
	log = log.With("worker", "w-1", "message_id", "MSG-1") // a component repeating what it was given
	log.Info("lease renewed", "took", 1500*time.Millisecond, "worker", "w-1", slog.Group("lease", "left", 2*time.Minute))
	line := bytes.TrimSpace(buf.Bytes())
	var got map[string]any
	require.NoError(t, strictjson.DecodeObject(line, &got, strictjson.Options{AllowUnknown: true}), "no key twice: %s", line)
	require.Equal(t, "1.5s", got["took"])
	require.Equal(t, "w-1", got["worker"])
	require.Equal(t, map[string]any{"left": "2m0s"}, got["lease"])
	require.Equal(t, 1, strings.Count(string(line), `"worker"`), "%s", line)
}

// projections rebuild --as-of says what it folded, not "through the end
// of the log"; --as-of with --to-position is refused; the side schema is
// listed and dropped.
func TestProjectionsAsOfIsHonest(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	es, rm, tr := schema+"_es", schema+"_rm", schema+"_tr"
	side := schema + "_asof"
	t.Cleanup(func() { dropSchemas(url, es, rm, tr, side) })
	code, _, stderr := cli3(t, "migrate", "--database-url", url, "--store-schema", es, "--schema", rm, "--transport-schema", tr)
	require.Equal(t, 0, code, stderr)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	store := pgtest.OpenMigrated(t, url, es)
	playStory(t, store)
	var firstAt time.Time
	events := pgx.Identifier{es, "events"}.Sanitize()
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT recorded_at FROM `+events+` ORDER BY global_position LIMIT 1`).Scan(&firstAt))
	var early int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM `+events+` WHERE recorded_at <= $1`, firstAt).Scan(&early))
	require.Less(t, early, 8)
	waitVisible(t, url, es) // else the rebuild would honestly read fewer than 8

	flags := []string{"--database-url", url, "--store-schema", es, "--live-schema", rm}
	code, _, stderr = cli3(t, append([]string{"projections", "rebuild", "--as-of", "2026-11-27T00:00:00Z", "--to-position", "1/1"}, flags...)...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--as-of and --to-position together")

	code, out, stderr := cli3(t, append([]string{"projections", "rebuild", "--as-of", firstAt.Format(time.RFC3339Nano), "--schema", side}, flags...)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("built an as-of view in schema %s: %d of the 8 events read were recorded at or before", side, early))
	require.Contains(t, out, fmt.Sprintf("(1 operations); %d later ones are left out", 8-early))
	require.Contains(t, out, "opledger projections drop "+side)

	code, out, _ = cli3(t, "projections", "list", "--database-url", url, "--schema", rm)
	require.Equal(t, 0, code)
	require.Regexp(t, side+`\s+side\s+`, out)
	code, out, stderr = cli3(t, "projections", "drop", side, "--database-url", url, "--schema", rm)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "dropped side schema "+side)
	code, _, stderr = cli3(t, "projections", "drop", rm, "--database-url", url, "--schema", rm)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "live read models")
}

// The README's install line puts the binary where it says.
func TestREADMEInstallLine(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	for _, want := range []string{"go install ./cmd/opledger", "$(go env GOPATH)/bin", "opledger version"} {
		require.True(t, strings.Contains(string(raw), want), "README.md says %q", want)
	}
}
