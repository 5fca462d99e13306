// Package pgtest gives tests an isolated schema on a real PostgreSQL server.
//
// The server is DATABASE_URL, or DefaultURL when that is unset. Every call to
// Schema creates a fresh, uniquely named schema and drops it when the test
// ends, so tests using it may run with t.Parallel(). When the server cannot
// be reached the test fails (never skips) and says how to point it at one.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore/postgres"
)

// DefaultURL is the server tests use when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// schemaPrefix marks schemas created here, so a leftover from a killed run is
// recognizable (and safe to drop).
const schemaPrefix = "pgtest_"

// adminTimeout bounds each setup and cleanup statement, so a test against a
// hung server fails instead of hanging.
const adminTimeout = 30 * time.Second

// URL returns the server tests connect to: DATABASE_URL or DefaultURL.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates an empty schema for tb on the test server and drops it (with
// everything in it) in tb.Cleanup. It returns the server's URL and the
// schema's name. The schema is not migrated; see OpenStore.
func Schema(tb testing.TB) (url, schema string) {
	tb.Helper()
	url = URL()
	schema = schemaPrefix + sanitize(tb.Name()) + "_" + randomSuffix(tb)

	ctx, cancel := context.WithTimeout(tb.Context(), adminTimeout)
	defer cancel()
	conn := connect(ctx, tb, url)
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema %s on %s: %v", schema, postgres.RedactURL(url), err)
	}
	tb.Cleanup(func() {
		// tb.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		conn := connect(ctx, tb, url)
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return url, schema
}

// OpenStore creates a fresh schema for tb, migrates it, and returns a store
// on it that is closed in tb.Cleanup (before the schema is dropped).
func OpenStore(tb testing.TB) *postgres.Store {
	tb.Helper()
	url, schema := Schema(tb)
	return OpenMigrated(tb, url, schema)
}

// OpenMigrated migrates schema on url and opens a store on it, closed in
// tb.Cleanup. Use it to open a second store on a schema OpenStore or Schema
// made (the migration is then a no-op).
func OpenMigrated(tb testing.TB, url, schema string) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), adminTimeout)
	defer cancel()
	conn := connect(ctx, tb, url)
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := postgres.Migrate(ctx, conn, schema); err != nil {
		tb.Fatalf("pgtest: migrate %s: %v", schema, err)
	}
	store, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		tb.Fatalf("pgtest: open store on %s: %v", postgres.RedactURL(url), err)
	}
	tb.Cleanup(store.Close)
	return store
}

func connect(ctx context.Context, tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		tb.Fatalf("pgtest: cannot parse DATABASE_URL %s", postgres.RedactURL(url))
	}
	cfg.ConnectTimeout = 5 * time.Second
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: PostgreSQL is not reachable at %s: %v\n"+
			"These tests need a real server: start one (scripts/ has helpers) or set DATABASE_URL.",
			postgres.RedactURL(url), err)
	}
	return conn
}

// sanitize keeps the test name readable in the schema name: lowercase
// letters, digits and underscores, at most 40 bytes (identifiers stop at 63).
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return b.String()
}

func randomSuffix(tb testing.TB) string {
	var buf [5]byte
	if _, err := rand.Read(buf[:]); err != nil {
		tb.Fatalf("pgtest: random schema suffix: %v", err)
	}
	return hex.EncodeToString(buf[:])
}
