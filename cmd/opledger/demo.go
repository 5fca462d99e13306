package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"opledger/adapters/harness"
	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres"
)

func init() {
	register("demo", "play the seed's Thursday/Friday refund story end to end", runDemo)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("demo", "[--database-url URL] [--memory]", stderr)
	db := dbFlags(fs)
	inMemory := fs.Bool("memory", false, "use the in-memory event store even when Postgres is reachable")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	store, where, cleanup := demoStore(ctx, db, *inMemory, stderr)
	defer cleanup()
	fmt.Fprintf(stdout, "opledger demo: event store %s\n\n", where)

	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1, Logger: newQuietLogger(stderr)})
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer w.Close()
	sum, err := harness.RunStory(ctx, w, stdout, nil)
	if err != nil {
		return fail(stderr, "demo", err)
	}

	fmt.Fprintln(stdout, "\n== audit replay "+string(harness.StoryOperation)+" (straight from its stream)")
	rows, err := audit.Replay(ctx, store, harness.StoryOperation)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if err := audit.WriteTimelineText(stdout, harness.StoryOperation, rows); err != nil {
		return fail(stderr, "demo", err)
	}
	fmt.Fprintln(stdout, "\n== audit verify (every invariant over the whole log)")
	report, err := audit.Verify(ctx, store, audit.VerifyOptions{})
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if err := report.WriteText(stdout); err != nil {
		return fail(stderr, "demo", err)
	}
	result := demoResult{Summary: sum, Invariants: "ok"}
	if !report.OK() {
		var b strings.Builder
		_ = report.WriteText(&b)
		result.Invariants = b.String()
	}
	fmt.Fprintln(stdout)
	line, _ := json.Marshal(result)
	fmt.Fprintln(stdout, string(line))
	if sum.RefundsCreated != 1 || !report.OK() {
		return 1
	}
	return 0
}

// demoResult is the demo's last line.
type demoResult struct {
	harness.Summary
	Invariants string `json:"invariants"`
}

// demoStore opens Postgres in a schema of the demo's own when it is
// reachable, and otherwise says so and falls back to memory.
func demoStore(ctx context.Context, db *dbConfig, inMemory bool, stderr io.Writer) (eventstore.Store, string, func()) {
	if !inMemory {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		pool, err := db.pool(pctx)
		if err == nil {
			schema := fmt.Sprintf("opledger_demo_%d", time.Now().Unix())
			if _, err = postgres.Migrate(pctx, pool, schema); err == nil {
				s, _ := postgres.New(pool, schema)
				return s, fmt.Sprintf("PostgreSQL %s, schema %s (kept for inspection)", postgres.RedactURL(db.url), schema), pool.Close
			}
			pool.Close()
		}
		fmt.Fprintf(stderr, "opledger demo: PostgreSQL at %s not usable (%v); running on the in-memory store\n", postgres.RedactURL(db.url), err)
	}
	return memory.New(nil), "in memory (nothing is kept)", func() {}
}
