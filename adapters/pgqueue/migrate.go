package pgqueue

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// Migration is one embedded schema change.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations returns the embedded migrations in version order; versions run
// 1..n without gaps, else it is a build bug reported as an error.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".sql")
		num, name, ok2 := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || v <= 0 || name == "" {
			return nil, fmt.Errorf("embedded migration %q: want NNN_name.sql", e.Name())
		}
		body, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read embedded migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	slices.SortFunc(out, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("embedded migrations: version %d where %d was expected", m.Version, i+1)
		}
	}
	return out, nil
}

// Migrate brings schema (DefaultSchema when empty) up to the embedded
// migrations, creating it if needed, and returns the versions applied.
// Pending migrations run in one transaction, each recorded in
// schema.schema_migrations; concurrent calls serialize on an advisory lock.
// Nothing else in this package creates or changes the schema.
func Migrate(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	schema, err = schemaName(schema)
	if err != nil {
		return nil, err
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	op := "migrate transport schema " + schema
	ident := pgx.Identifier{schema}.Sanitize()
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: begin: %w", op, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "opledger.transport.migrate:"+schema); err != nil {
		return nil, fmt.Errorf("%s: lock: %w", op, err)
	}
	setup := `CREATE SCHEMA IF NOT EXISTS ` + ident + `;
CREATE TABLE IF NOT EXISTS ` + ident + `.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
SET LOCAL search_path TO ` + ident
	if _, err := tx.Exec(ctx, setup); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	have, err := appliedVersions(ctx, tx, ident)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	for _, m := range migrations {
		if slices.Contains(have, m.Version) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("%s: migration %03d_%s: %w", op, m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, fmt.Errorf("%s: record %03d_%s: %w", op, m.Version, m.Name, err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("%s: commit: %w", op, err)
	}
	return applied, nil
}

// CheckSchema returns nil when schema holds every embedded migration, else
// an error wrapping ErrSchemaOutdated that names what is missing. Workers
// and tools refuse to start on it.
func CheckSchema(ctx context.Context, db Querier, schema string) error {
	schema, err := schemaName(schema)
	if err != nil {
		return err
	}
	op := "check transport schema " + schema
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	have, err := appliedVersions(ctx, db, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
			return fmt.Errorf("%s: %w: never migrated: run 'opledger migrate'", op, ErrSchemaOutdated)
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	var missing []string
	for _, m := range migrations {
		if !slices.Contains(have, m.Version) {
			missing = append(missing, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %w: missing %s: run 'opledger migrate'", op, ErrSchemaOutdated, strings.Join(missing, ", "))
	}
	return nil
}

func appliedVersions(ctx context.Context, q Querier, ident string) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT version FROM `+ident+`.schema_migrations`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// schemaName defaults and validates a schema name (Postgres truncates
// identifiers beyond 63 bytes silently, so those are refused).
func schemaName(schema string) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if len(schema) > 63 || strings.ContainsRune(schema, 0) {
		return "", fmt.Errorf("pgqueue: schema name %q must be 1..63 bytes without NUL", schema)
	}
	return schema, nil
}
