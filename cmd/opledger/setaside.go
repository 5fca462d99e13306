package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"opledger/adapters/httpapi"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/setaside"
)

func init() {
	register("set-aside", "list and release the background loops' set-aside items (list, release)", runSetAside)
}

const setAsideUsage = `usage: opledger set-aside <list|release> [flags]

  list [--role R] [--all] [--limit N] [--json]
                       items the loops set aside (--all: those still being retried too),
                       oldest first failure first
  release ROLE ITEM    forget ITEM's failures: its loop tries it again at its next round

A background loop (sweeper, reconciler, log-index, projector, relay, queue, kafka) retries
an item that fails with something other than a refusal it expects a bounded number of
times, with a doubling backoff, then sets it aside: no loop tries it again until it is
released. Release an item after fixing its cause, or it is set aside again.
Run 'opledger set-aside <subcommand> --help' for flags.`

func runSetAside(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, args, synopsis, code, ok := subcommand("set-aside", setAsideUsage,
		map[string]string{"list": "[--role R] [--all] [--limit N] [--json] [flags]", "release": "ROLE ITEM [flags]"}, args, stderr)
	if !ok {
		return code
	}
	f := newFlags("set-aside "+sub, synopsis, stderr)
	f.Bind(settings.DatabaseURL, settings.TransportSchema)
	var (
		role   string
		all    bool
		limit  int
		asJSON bool
	)
	if sub == "list" {
		f.Local().StringVar(&role, "role", "", "only this loop's items: "+roleNames())
		f.Local().BoolVar(&all, "all", false, "also the items still being retried (not yet set aside)")
		f.Local().IntVar(&limit, "limit", setaside.DefaultListLimit, fmt.Sprintf("at most this many items (1..%d)", setaside.MaxListLimit))
		f.Local().BoolVar(&asJSON, "json", false, "one JSON object per item, as GET /v1/set-aside answers them")
	}
	if code, ok := f.Parse(args); !ok {
		return code
	}
	operand := f.Args()
	cmd := "set-aside " + sub
	switch {
	case sub == "list" && len(operand) > 0:
		return fail(stderr, cmd, fmt.Errorf("unexpected arguments %q", operand))
	case sub == "list" && (limit < 1 || limit > setaside.MaxListLimit):
		return fail(stderr, cmd, fmt.Errorf("--limit %d: want 1..%d", limit, setaside.MaxListLimit))
	case sub == "list" && role != "" && !setaside.Role(role).Known():
		return fail(stderr, cmd, fmt.Errorf("--role %q: want one of %s", role, roleNames()))
	case sub == "release" && len(operand) != 2:
		return fail(stderr, cmd, errors.New("want ROLE ITEM, e.g. opledger set-aside release reconciler EXE-4471.1"))
	case sub == "release" && !setaside.Role(operand[0]).Known():
		return fail(stderr, cmd, fmt.Errorf("role %q: want one of %s", operand[0], roleNames()))
	}
	db := dbFrom(f)
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	if err := pgstate.CheckSchema(ctx, pool, db.transport); err != nil {
		return fail(stderr, cmd, schemaError(db, err, pgstate.ErrSchemaOutdated))
	}
	store, err := pgsetaside.New(pool, db.transport)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if sub == "release" {
		return releaseSetAside(ctx, store, setaside.Role(operand[0]), operand[1], stdout, stderr)
	}
	items, err := store.List(ctx, setaside.Query{Role: setaside.Role(role), SetAsideOnly: !all, Limit: limit})
	if err != nil {
		return fail(stderr, cmd, err)
	}
	if asJSON {
		return printSetAsideJSON(items, stdout, stderr)
	}
	return printSetAside(items, limit, all, stdout, stderr)
}

func roleNames() string {
	names := make([]string, len(setaside.Roles))
	for i, r := range setaside.Roles {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

func releaseSetAside(ctx context.Context, store setaside.Store, role setaside.Role, item string, stdout, stderr io.Writer) int {
	it, found, err := store.Get(ctx, role, item)
	if err != nil {
		return fail(stderr, "set-aside release", err)
	}
	if !found {
		return fail(stderr, "set-aside release", fmt.Errorf("%s has no failing item %q (opledger set-aside list --all)", role, item))
	}
	if err := store.Clear(ctx, role, item); err != nil {
		return fail(stderr, "set-aside release", err)
	}
	state := "retrying"
	if it.SetAside {
		state = "set aside"
	}
	fmt.Fprintf(stdout, "released %s %s (%s after %d attempts: %s)\n%s\n", role, item, state, it.Attempts, it.Reason, httpapi.ReleaseNote(role))
	return 0
}

func printSetAside(items []setaside.Item, limit int, all bool, stdout, stderr io.Writer) int {
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tITEM\tOPERATION\tREASON\tATTEMPTS\tSTATE\tFIRST FAILED")
	for _, it := range items {
		state := "retry at " + it.RetryAt.UTC().Format(time.RFC3339)
		if it.SetAside {
			state = "set aside at " + it.SetAsideAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", it.Role, it.Item, orDash(string(it.OperationID)), it.Reason, it.Attempts,
			state, it.FirstFailedAt.UTC().Format(time.RFC3339))
		if it.Detail != "" {
			fmt.Fprintf(tw, "\t  %s\t\t\t\t\t\n", oneLine(it.Detail))
		}
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "set-aside list", err)
	}
	what := "set-aside items"
	if all {
		what = "failing items"
	}
	fmt.Fprintf(stdout, "%d %s\n", len(items), what)
	if len(items) == limit {
		fmt.Fprintf(stdout, "(the first %d: there may be more; raise --limit)\n", limit)
	}
	return 0
}

func printSetAsideJSON(items []setaside.Item, stdout, stderr io.Writer) int {
	enc := json.NewEncoder(stdout)
	for _, it := range items {
		if err := enc.Encode(httpapi.NewSetAsideView(it)); err != nil {
			return fail(stderr, "set-aside list", err)
		}
	}
	return 0
}
