package projections

import (
	"context"
	"embed"
	"errors"

	"opledger/eventstore/postgres/pgmigrate"
)

// ErrSchemaOutdated means the read-model schema is behind the migrations
// this binary embeds (or was never migrated): run Migrate (`opledger
// migrate`) before serving or projecting.
var ErrSchemaOutdated = errors.New("read-model schema outdated")

// migrationFiles holds the read models' schema, one numbered file per change
// (NNN_name.sql). Files are never edited once released; a change is a new
// file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationSet applies migrationFiles. The lock (hashtextextended of
// "opledger.projections.migrate:<schema>") is the one released binaries take:
// never change it, or an old and a new binary could migrate one schema at
// once.
var migrationSet = pgmigrate.Set{
	Name:     "read-model schema",
	Files:    migrationFiles,
	Dir:      "migrations",
	LockKey:  "opledger.projections.migrate:",
	LockHash: pgmigrate.HashTextExtended,
	Outdated: ErrSchemaOutdated,
}

// Migration is one embedded schema change.
type Migration = pgmigrate.Migration

// Migrations returns the migrations this binary embeds, in version order.
// Versions run 1..n without gaps; a malformed set is a build bug, reported
// as an error.
func Migrations() ([]Migration, error) { return migrationSet.Migrations() }

// Migrate brings schema (DefaultSchema when empty) up to the migrations this
// binary embeds, creating the schema if it does not exist, and returns the
// versions it applied (none when the schema was current). Pending migrations
// run in one transaction, each recorded in schema.schema_migrations, so a
// failed migration leaves nothing behind. Concurrent Migrate calls on one
// schema serialize on an advisory lock. Versions in the database this binary
// does not know (a newer binary migrated it) are left alone.
//
// Migrate is the only thing that creates or changes the schema: nothing in
// this package does so implicitly on connect.
func Migrate(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return nil, err
	}
	return migrationSet.Apply(ctx, db, schema)
}

// CheckSchema returns nil when schema (DefaultSchema when empty) holds every
// migration this binary embeds, and otherwise an error wrapping
// ErrSchemaOutdated naming what is missing (or saying the schema was never
// migrated). `serve` and the projector refuse to start on it. Other failures
// (the server unreachable) are returned wrapped as they are.
func CheckSchema(ctx context.Context, db Querier, schema string) error {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return err
	}
	return migrationSet.Check(ctx, db, schema)
}
