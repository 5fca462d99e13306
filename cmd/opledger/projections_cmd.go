package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"opledger/eventstore"
	"opledger/projections"
)

func init() {
	register("projections", "rebuild the read models (swap in, or an as-of view for auditors)", runProjections)
}

func runProjections(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "rebuild" {
		fmt.Fprintln(stderr, `usage: opledger projections rebuild [--to-position P | --as-of TIME] [--schema NAME]

Without --to-position/--as-of: rebuilds the read models from the start of the log into a fresh
schema and swaps it in atomically (queries never see half a rebuild).
With either: builds a side schema at that past point, the "as of" view; the live models are untouched.`)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return 2
	}
	fs := flags("projections rebuild", "[--to-position P | --as-of TIME] [--schema NAME]", stderr)
	db := dbFlagsNamed(fs, "live-schema")
	to := fs.String("to-position", "", "fold events up to and including this global position (as the store prints it)")
	asOf := fs.String("as-of", "", "fold only events recorded at or before this time (RFC 3339, e.g. 2026-11-27T15:30:00Z)")
	target := fs.String("schema", "", "schema to build into (must not exist or be empty); default <live>_rebuild_<time>")
	if code, ok := parse(fs, args[1:]); !ok {
		return code
	}
	opts := projections.RebuildOptions{ToPosition: *to, Schema: *target, Live: db.viewSchema}
	if *asOf != "" {
		t, err := time.Parse(time.RFC3339Nano, *asOf)
		if err != nil {
			return fail(stderr, "projections rebuild", fmt.Errorf("--as-of %q: want RFC 3339, e.g. 2026-11-27T15:30:00Z", *asOf))
		}
		opts.AsOf = t
	}
	opts.Swap = opts.ToPosition == "" && opts.AsOf.IsZero()
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, "projections rebuild", err)
	}
	defer pool.Close()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return fail(stderr, "projections rebuild", err)
	}
	defer opened.Release()
	store := opened.Store
	p := newProgress(stderr, "events folded") // on a terminal only: piped, nothing
	var end eventstore.Position
	if opts.ToPosition != "" {
		end, _ = store.ParsePosition(opts.ToPosition) // a bad one is Rebuild's to refuse
	}
	res, err := projections.Rebuild(ctx, pool, withProgress(ctx, store, p, end), opts)
	p.finish()
	if err != nil {
		return fail(stderr, "projections rebuild", err)
	}
	if res.Swapped {
		fmt.Fprintf(stdout, "rebuilt the read models through %s and swapped them in as %s\n", res.Checkpoint.Position, res.Schema)
	} else {
		fmt.Fprintf(stdout, "built an as-of view through %s in schema %s (the live read models are untouched)\n", res.Checkpoint.Position, res.Schema)
	}
	if res.Skipped > 0 {
		fmt.Fprintf(stdout, "%d events could not be decoded or folded and were skipped: see %s.skipped_events and operations.projection_incomplete\n", res.Skipped, res.Schema)
	}
	return 0
}
