// Package pgmigrate applies numbered SQL migrations to one PostgreSQL schema
// and checks that a schema is current. The event store, the read models and
// the transport each describe their migrations with a Set and keep their own
// Migrate and CheckSchema as thin wrappers around Apply and Check.
//
// A Set's migrations are files named NNN_name.sql (version NNN, 1..n without
// gaps) in one directory of an fs.FS, normally embedded with //go:embed.
// Released files are never edited; a change is a new file. Apply records
// each applied version in <schema>.schema_migrations:
//
//	version    integer     PRIMARY KEY
//	name       text        NOT NULL
//	applied_at timestamptz NOT NULL DEFAULT now()
//
// Nothing here creates or changes a schema except Apply.
package pgmigrate

import (
	"cmp"
	"context"
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

// MaxSchemaNameLen is Postgres's identifier limit (NAMEDATALEN-1 bytes).
// The server silently truncates longer names, so they are refused.
const MaxSchemaNameLen = 63

// ErrSchemaOutdated is what Check's error wraps when a Set supplies no
// Outdated sentinel of its own.
var ErrSchemaOutdated = errors.New("schema outdated")

// SQLSTATEs that mean a schema was never migrated: the schema or its
// schema_migrations table does not exist.
const (
	sqlstateInvalidSchemaName = "3F000"
	sqlstateUndefinedTable    = "42P01"
)

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx all
// satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Querier runs statements: *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy
// it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migration is one schema change.
type Migration struct {
	Version int    // from the file name's numeric prefix: 1, 2, ...
	Name    string // the rest of the file name, e.g. "events"
	SQL     string
}

// LockHash says how Apply turns a Set's lock key into an advisory lock id.
type LockHash int

const (
	// HashTextExtended locks pg_advisory_xact_lock(hashtextextended(key, 0)),
	// a 64-bit id.
	HashTextExtended LockHash = iota
	// HashText locks pg_advisory_xact_lock(hashtext(key)), a 32-bit id; the
	// event store has always locked this way.
	HashText
)

// Set is one schema's migrations and how to apply them. Its fields are read,
// never written, so a Set may be shared by concurrent calls.
//
// LockKey and LockHash of a released Set must never change: they name the
// advisory lock, and two binaries that compute different locks for one
// schema would migrate it at the same time.
type Set struct {
	// Name says what the schema holds in error messages, which read
	// "migrate <Name> <schema>: ..." and "check <Name> <schema>: ...",
	// e.g. "read-model schema". Default "schema".
	Name string
	// Files holds the migrations in Dir. Required.
	Files fs.FS
	// Dir is the directory in Files holding NNN_name.sql. Default
	// "migrations".
	Dir string
	// LockKey prefixes the schema name to form the advisory lock key,
	// e.g. "opledger.transport.migrate:". Required.
	LockKey string
	// LockHash hashes the key to a lock id. Default HashTextExtended.
	LockHash LockHash
	// Outdated is the sentinel Check's error wraps for a schema missing
	// migrations. Default ErrSchemaOutdated.
	Outdated error
	// Interpret, when set, turns a database error during op (which names
	// the schema, and the migration when one failed) into the error to
	// return; it must wrap err. When nil, the error is
	// fmt.Errorf("%s: %w", op, err).
	Interpret func(op string, err error) error
}

// Migrations returns the Set's migrations in version order. Versions run
// 1..n without gaps; a malformed set is a build bug, reported as an error.
func (s Set) Migrations() ([]Migration, error) {
	dir := cmp.Or(s.Dir, "migrations")
	if s.Files == nil {
		return nil, errors.New("pgmigrate: Set has no Files")
	}
	entries, err := fs.ReadDir(s.Files, dir)
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
		body, err := fs.ReadFile(s.Files, path.Join(dir, e.Name()))
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

// Apply brings schema up to the Set's migrations, creating the schema if it
// does not exist, and returns the versions it applied (none when the schema
// was current). Callers default the schema name; Apply only validates it
// (ValidateSchemaName).
//
// Pending migrations run in one transaction, each recorded in
// schema.schema_migrations, so a failed migration leaves nothing behind.
// Their SQL runs with search_path set to schema alone, so unqualified names
// land in it. Concurrent Apply calls on one schema serialize on a
// transaction-scoped advisory lock on LockKey+schema (see LockHash). Versions
// in the database the Set does not know (a newer binary migrated it) are left
// alone.
func (s Set) Apply(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	if err := ValidateSchemaName(schema); err != nil {
		return nil, err
	}
	if s.LockKey == "" {
		return nil, errors.New("pgmigrate: Set has no LockKey")
	}
	migrations, err := s.Migrations()
	if err != nil {
		return nil, err
	}
	op := "migrate " + s.name() + " " + schema
	ident := pgx.Identifier{schema}.Sanitize()
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, s.interpret(op+": begin", err)
	}
	defer func() {
		if err != nil {
			// The context may be why it failed; the rollback must still
			// reach the server or pgx discards the connection.
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	// Released when the transaction ends.
	if _, err := tx.Exec(ctx, s.lockSQL(), s.LockKey+schema); err != nil {
		return nil, s.interpret(op+": lock", err)
	}
	setup := `CREATE SCHEMA IF NOT EXISTS ` + ident + `;
CREATE TABLE IF NOT EXISTS ` + ident + `.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
SET LOCAL search_path TO ` + ident
	if _, err := tx.Exec(ctx, setup); err != nil {
		return nil, s.interpret(op, err)
	}
	have, err := appliedVersions(ctx, tx, ident)
	if err != nil {
		return nil, s.interpret(op, err)
	}
	for _, m := range migrations {
		if slices.Contains(have, m.Version) {
			continue
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, s.interpret(fmt.Sprintf("%s: migration %03d_%s", op, m.Version, m.Name), err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return nil, s.interpret(fmt.Sprintf("%s: record %03d_%s", op, m.Version, m.Name), err)
		}
		applied = append(applied, m.Version)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, s.interpret(op+": commit", err)
	}
	return applied, nil
}

// Check returns nil when schema holds every migration of the Set (versions
// the Set does not know are ignored). When some are missing, or the schema
// was never migrated, the error wraps Outdated and names the missing
// migrations. Other failures (the server unreachable) go through Interpret.
// Check only reads.
func (s Set) Check(ctx context.Context, db Querier, schema string) error {
	if err := ValidateSchemaName(schema); err != nil {
		return err
	}
	migrations, err := s.Migrations()
	if err != nil {
		return err
	}
	op := "check " + s.name() + " " + schema
	outdated := cmp.Or(s.Outdated, ErrSchemaOutdated)
	have, err := appliedVersions(ctx, db, pgx.Identifier{schema}.Sanitize())
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == sqlstateUndefinedTable || pgErr.Code == sqlstateInvalidSchemaName) {
			return fmt.Errorf("%s: %w: never migrated", op, outdated)
		}
		return s.interpret(op, err)
	}
	var missing []string
	for _, m := range migrations {
		if !slices.Contains(have, m.Version) {
			missing = append(missing, fmt.Sprintf("%03d_%s", m.Version, m.Name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %w: missing migrations %s", op, outdated, strings.Join(missing, ", "))
	}
	return nil
}

// ValidateSchemaName returns an error unless schema is 1..MaxSchemaNameLen
// bytes without NUL: a name Postgres keeps as given once quoted.
func ValidateSchemaName(schema string) error {
	if schema == "" || len(schema) > MaxSchemaNameLen {
		return fmt.Errorf("schema name %q must be 1..%d bytes", schema, MaxSchemaNameLen)
	}
	if strings.ContainsRune(schema, 0) {
		return fmt.Errorf("schema name %q contains NUL", schema)
	}
	return nil
}

func (s Set) name() string { return cmp.Or(s.Name, "schema") }

func (s Set) lockSQL() string {
	if s.LockHash == HashText {
		return `SELECT pg_advisory_xact_lock(hashtext($1))`
	}
	return `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
}

func (s Set) interpret(op string, err error) error {
	if s.Interpret != nil {
		return s.Interpret(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func appliedVersions(ctx context.Context, q Querier, ident string) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT version FROM `+ident+`.schema_migrations`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
