package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/cmd/opledger/internal/settings"
	"opledger/eventstore"
	"opledger/projections"
)

func init() {
	register("projections", "rebuild the read models (swap in, or an as-of view for auditors); list and drop side schemas", runProjections)
}

const projectionsUsage = `usage: opledger projections <rebuild|list|drop> [flags]

  rebuild [--to-position P | --as-of TIME] [--schema NAME]
      Without --to-position/--as-of: rebuilds the read models from the start of the log into a
      fresh schema and swaps it in atomically (queries never see half a rebuild). With one of
      them: builds a side schema at that past point, the "as of" view; the live models are
      untouched.
  list
      every schema holding read models: the live one, and the side schemas rebuilds left
  drop NAME
      drop a side schema (never the live one, never a schema without read models, never one
      a projector is running on)

Run 'opledger projections <subcommand> --help' for flags.`

func runProjections(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, projectionsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "rebuild":
		return projectionsRebuild(ctx, args[1:], stdout, stderr)
	case "list":
		return projectionsList(ctx, args[1:], stdout, stderr)
	case "drop":
		return projectionsDrop(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "opledger projections: unknown subcommand %q\n\n%s\n", args[0], projectionsUsage)
	return 2
}

func projectionsRebuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const cmd = "projections rebuild"
	f := newFlags(cmd, "[--to-position P | --as-of TIME] [--schema NAME] [flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.ReadModelSchema) // --live-schema here: --schema names the target
	to := f.Local().String("to-position", "", "fold events up to and including this global position (as the store prints it)")
	asOf := f.Local().String("as-of", "", "fold only events recorded at or before this time (RFC 3339, e.g. 2026-11-27T15:30:00Z)")
	target := f.Local().String("schema", "", "schema to build into (must not exist or be empty); default <live>_rebuild_<time>")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, cmd, fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	if *to != "" && *asOf != "" {
		return fail(stderr, cmd, errors.New("--as-of and --to-position together: give one past point (a time, or a position)"))
	}
	db := dbFrom(f)
	opts := projections.RebuildOptions{ToPosition: *to, Schema: *target, Live: db.viewSchema}
	if *asOf != "" {
		t, err := time.Parse(time.RFC3339Nano, *asOf)
		if err != nil {
			return fail(stderr, cmd, fmt.Errorf("--as-of %q: want RFC 3339, e.g. 2026-11-27T15:30:00Z", *asOf))
		}
		opts.AsOf = t
	}
	opts.Swap = opts.ToPosition == "" && opts.AsOf.IsZero()
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return fail(stderr, cmd, err)
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
		return fail(stderr, cmd, err)
	}
	ops, err := countOperations(ctx, pool, res.Schema)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	through := orDash(res.Checkpoint.Text)
	switch {
	case res.Swapped:
		fmt.Fprintf(stdout, "rebuilt the read models from %d events (%d operations) through position %s and swapped them in as %s\n",
			res.Folded, ops, through, res.Schema)
	case !opts.AsOf.IsZero():
		fmt.Fprintf(stdout, "built an as-of view in schema %s: %d of the %d events read were recorded at or before %s (%d operations);"+
			" %d later ones are left out (the log was read through position %s); the live read models are untouched\n",
			res.Schema, res.Folded, res.Read, opts.AsOf.UTC().Format(time.RFC3339Nano), ops, res.Read-res.Folded-res.Skipped, through)
	default:
		fmt.Fprintf(stdout, "built an as-of view in schema %s: %d events (%d operations) through position %s; the live read models are untouched\n",
			res.Schema, res.Folded, ops, through)
	}
	if res.Skipped > 0 {
		fmt.Fprintf(stdout, "%d events could not be decoded or folded and were skipped: see %s.skipped_events and operations.projection_incomplete\n", res.Skipped, res.Schema)
	}
	if !res.Swapped {
		fmt.Fprintf(stdout, "it stays until dropped: opledger projections drop %s\n", res.Schema)
	}
	return 0
}

// countOperations counts the operations the read models in schema hold.
func countOperations(ctx context.Context, q projections.Querier, schema string) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "operations"}.Sanitize()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the operations of %s: %w", schema, err)
	}
	return n, nil
}

func projectionsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const cmd = "projections list"
	f := newFlags(cmd, "[flags]", stderr)
	f.Bind(settings.DatabaseURL, settings.ReadModelSchema)
	if code, ok := f.Parse(args); !ok {
		return code
	}
	db := dbFrom(f)
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	schemas, err := projections.ListSchemas(ctx, pool, db.viewSchema)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEMA\tKIND\tEVENTS APPLIED\tCHECKPOINT\tUPDATED")
	for _, s := range schemas {
		kind := "side"
		if s.Live {
			kind = "live"
		}
		updated := "-"
		if !s.Updated.IsZero() {
			updated = s.Updated.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.Name, kind, s.EventsApplied, orDash(s.Checkpoint), updated)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, cmd, err)
	}
	if len(schemas) == projections.MaxListedSchemas {
		fmt.Fprintf(stdout, "(the first %d schemas: there may be more)\n", len(schemas))
	}
	return 0
}

func projectionsDrop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const cmd = "projections drop"
	f := newFlags(cmd, "NAME [flags]", stderr)
	f.Bind(settings.DatabaseURL, settings.ReadModelSchema)
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) != 1 {
		return fail(stderr, cmd, errors.New("want one schema NAME (opledger projections list shows them)"))
	}
	db := dbFrom(f)
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	if err := projections.DropSideSchema(ctx, pool, db.viewSchema, f.Arg(0)); err != nil {
		return fail(stderr, cmd, err)
	}
	fmt.Fprintf(stdout, "dropped side schema %s\n", f.Arg(0))
	return 0
}
