// Package pgstate is the transport schema on PostgreSQL and the state the
// relays keep in it beside any transport: the schema's migrations (Migrate,
// CheckSchema), where each relay stands in the log (Checkpoints) and the
// lock each relay leads under (NewLeader). The same schema holds the
// Postgres queue's tables (adapters/pgqueue) and every loop's set-aside
// items (adapters/pgsetaside), which its migrations also create.
package pgstate

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"opledger/eventstore/postgres/pgmigrate"
)

// DefaultSchema holds the transport's tables when no schema is configured.
const DefaultSchema = "opledger_transport"

// ErrSchemaOutdated means the transport schema lacks migrations this binary
// embeds (or was never migrated): run Migrate (`opledger migrate`).
var ErrSchemaOutdated = errors.New("transport schema outdated")

// migrationFiles holds the schema, one numbered file per change
// (NNN_name.sql). Files are never edited once released; a change is a new
// file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationSet applies migrationFiles. The lock (hashtextextended of
// "opledger.transport.migrate:<schema>") is the one released binaries take:
// never change it, or an old and a new binary could migrate one schema at
// once.
var migrationSet = pgmigrate.Set{
	Name:     "transport schema",
	Files:    migrationFiles,
	Dir:      "migrations",
	LockKey:  "opledger.transport.migrate:",
	LockHash: pgmigrate.HashTextExtended,
	Outdated: ErrSchemaOutdated,
}

// Migration is one embedded schema change.
type Migration = pgmigrate.Migration

// Migrations returns the embedded migrations in version order; versions run
// 1..n without gaps, else it is a build bug reported as an error.
func Migrations() ([]Migration, error) { return migrationSet.Migrations() }

// Migrate brings schema (DefaultSchema when empty) up to the embedded
// migrations, creating it if needed, and returns the versions applied.
// Pending migrations run in one transaction, each recorded in
// schema.schema_migrations; concurrent calls serialize on an advisory lock.
// Nothing else creates or changes the schema.
func Migrate(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	schema, err = Schema(schema)
	if err != nil {
		return nil, err
	}
	return migrationSet.Apply(ctx, db, schema)
}

// CheckSchema returns nil when schema (DefaultSchema when empty) holds every
// embedded migration, else an error wrapping ErrSchemaOutdated that names
// what is missing. Workers and tools refuse to start on it.
func CheckSchema(ctx context.Context, db Querier, schema string) error {
	schema, err := Schema(schema)
	if err != nil {
		return err
	}
	return migrationSet.Check(ctx, db, schema)
}

// Schema defaults (DefaultSchema when empty) and validates the name of a
// transport schema (Postgres truncates identifiers beyond 63 bytes
// silently, so those are refused).
func Schema(schema string) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := pgmigrate.ValidateSchemaName(schema); err != nil {
		return "", fmt.Errorf("transport schema: %w", err)
	}
	return schema, nil
}
