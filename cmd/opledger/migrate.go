package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore/postgres"
	"opledger/projections"
)

func init() {
	register("migrate", "apply the database schema (event store and read models)", runMigrate)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("migrate", "[--database-url URL] [--store-schema NAME]", stderr)
	db := dbFlags(fs)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, "migrate", err)
	}
	defer pool.Close()
	applied, err := postgres.Migrate(ctx, pool, db.storeSchema)
	if err != nil {
		return fail(stderr, "migrate", err)
	}
	fmt.Fprintf(stdout, "event store schema %s: applied %v\n", db.storeSchema, nonNil(applied))
	for _, m := range extraMigrations {
		schema := m.schema(db)
		applied, err := m.migrate(ctx, pool, schema)
		if err != nil {
			return fail(stderr, "migrate", err)
		}
		fmt.Fprintf(stdout, "%s schema %s: applied %v\n", m.name, schema, nonNil(applied))
	}
	return 0
}

// extraMigration is a further schema migrate applies.
type extraMigration struct {
	name    string
	schema  func(db *dbConfig) string
	migrate func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error)
}

// extraMigrations are the further schemas migrate applies, in order.
var extraMigrations = []extraMigration{
	{"read models", func(db *dbConfig) string { return db.viewSchema }, func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
		return projections.Migrate(ctx, pool, schema)
	}},
}

func nonNil(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}
