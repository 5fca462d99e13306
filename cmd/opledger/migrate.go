package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgmigrate"
	"opledger/projections"
)

func init() {
	register("migrate", "apply the database schema (event store, read models, transport tables)", runMigrate)
}

// schemaMigration is one schema migrate brings up to date.
type schemaMigration struct {
	what       string
	setting    *settings.Setting
	migrations func() ([]pgmigrate.Migration, error)
	migrate    func(ctx context.Context, db pgmigrate.Beginner, schema string) ([]int, error)
}

// migrations are the schemas migrate applies, in order.
var migrations = []schemaMigration{
	{"event store", settings.StoreSchema, postgres.Migrations, postgres.Migrate},
	{"read models", settings.ReadModelSchema, projections.Migrations, projections.Migrate},
	{"transport", settings.TransportSchema, pgstate.Migrations, pgstate.Migrate},
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("migrate", "[flags]", stderr)
	f.Bind(settings.DatabaseURL)
	for _, m := range migrations {
		f.Bind(m.setting)
	}
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, "migrate", fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	pool, err := dbFrom(f).pool(ctx)
	if err != nil {
		return fail(stderr, "migrate", err)
	}
	defer pool.Close()
	for _, m := range migrations {
		schema := f.Text(m.setting)
		applied, err := m.migrate(ctx, pool, schema)
		if err != nil {
			return fail(stderr, "migrate", fmt.Errorf("%s schema %s: %w", m.what, schema, err))
		}
		all, err := m.migrations()
		if err != nil {
			return fail(stderr, "migrate", err)
		}
		fmt.Fprintf(stdout, "%s schema %s: %s\n", m.what, schema, migrated(applied, all))
	}
	return 0
}

// migrated says what a migration run did: "applied 001_events,
// 002_hash_chain; at version 2", or "up to date at version 2".
func migrated(applied []int, all []pgmigrate.Migration) string {
	latest := 0
	names := map[int]string{}
	for _, m := range all {
		latest = max(latest, m.Version)
		names[m.Version] = fmt.Sprintf("%03d_%s", m.Version, m.Name)
	}
	if len(applied) == 0 {
		return fmt.Sprintf("up to date at version %d", latest)
	}
	done := make([]string, len(applied))
	for i, v := range applied {
		done[i] = names[v]
	}
	return fmt.Sprintf("applied %s; at version %d", strings.Join(done, ", "), latest)
}
