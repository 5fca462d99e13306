package postgres

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
)

// migrationFiles holds the schema, one numbered file per change
// (NNN_name.sql). Files are never edited once released; a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one embedded schema change.
type Migration struct {
	Version int    // from the file name's numeric prefix, 1, 2, ...
	Name    string // the rest of the file name, e.g. "events"
	SQL     string
}

// Migrations returns the migrations this binary embeds, in version order.
// Versions are 1..n without gaps; a malformed set is a build bug and is
// reported as an error.
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
			return nil, fmt.Errorf("embedded migrations: version %d where %d was expected (gap or duplicate)", m.Version, i+1)
		}
	}
	return out, nil
}

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx all
// satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate brings schema (DefaultSchema when empty) up to the migrations this
// binary embeds, creating the schema if it does not exist, and returns the
// versions it applied (none when the schema was current). Pending migrations
// are applied in one transaction, each recorded in schema.schema_migrations,
// so a failed migration leaves nothing behind. Concurrent Migrate calls on the
// same schema serialize on an advisory lock. Versions in the database that
// this binary does not know (a newer binary migrated it) are left alone.
//
// Migrate is the only thing that creates or changes the schema; Open and New
// never do.
func Migrate(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return nil, err
	}
	migrations, err := Migrations()
	if err != nil {
		return nil, err
	}
	op := "migrate " + schema
	ident := pgx.Identifier{schema}.Sanitize()

	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, interpretError(op, err)
	}
	defer func() {
		if err != nil {
			// The context may be the reason for the failure; the rollback still
			// needs to reach the server or the connection is discarded by pgx.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	// Serialize migrators of this schema. The lock is released at commit or
	// rollback.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "opledger.migrate:"+schema); err != nil {
		return nil, interpretError(op, err)
	}
	setup := `CREATE SCHEMA IF NOT EXISTS ` + ident + `;
CREATE TABLE IF NOT EXISTS ` + ident + `.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
SET LOCAL search_path TO ` + ident
	if _, err := tx.Exec(ctx, setup); err != nil {
		return nil, interpretError(op, err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM `+ident+`.schema_migrations`)
	if err != nil {
		return nil, interpretError(op, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, interpretError(op, err)
	}
	for _, m := range migrations {
		if slices.Contains(have, m.Version) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, interpretError(fmt.Sprintf("%s: migration %03d_%s", op, m.Version, m.Name), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, interpretError(op, err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, interpretError(op, err)
	}
	return applied, nil
}

// CheckSchema returns nil when the store may serve: its schema holds every
// migration this binary embeds, else an error wrapping ErrSchemaOutdated
// names the missing versions (or says the schema was never migrated); and
// the log's transaction ids are behind the server's, else an error wraps
// ErrLogAheadOfServer (a restore into another cluster). A server should
// refuse to start on either. Connection failures wrap
// eventstore.ErrUnavailable.
func (s *Store) CheckSchema(ctx context.Context) error {
	op := "check schema " + s.schema
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT version FROM `+s.ident+`.schema_migrations`)
	if err != nil {
		if err := interpretError(op, err); errors.Is(err, ErrSchemaOutdated) {
			return fmt.Errorf("%s: %w: never migrated: run migrate", op, ErrSchemaOutdated)
		}
		return interpretError(op, err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return interpretError(op, err)
	}
	var missing []string
	for _, m := range migrations {
		if !slices.Contains(have, m.Version) {
			missing = append(missing, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %w: missing migrations %s: run migrate", op, ErrSchemaOutdated, strings.Join(missing, ", "))
	}
	return s.checkTransactionIDs(ctx, op)
}

// checkTransactionIDs refuses a log whose newest transaction id the server
// has not reached yet: it was restored from another cluster, and new events
// would sort before the restored ones, behind every reader's checkpoint.
func (s *Store) checkTransactionIDs(ctx context.Context, op string) error {
	var newest, next uint64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT max(transaction_id) FROM `+s.ident+`.events), '0'::xid8),
       pg_snapshot_xmax(pg_current_snapshot())`).Scan(&newest, &next)
	if err != nil {
		return interpretError(op, err)
	}
	if newest >= next {
		return fmt.Errorf("%s: %w: newest event's transaction id %d, server's next %d", op, ErrLogAheadOfServer, newest, next)
	}
	return nil
}
