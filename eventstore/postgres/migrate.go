package postgres

import (
	"context"
	"embed"
	"fmt"

	"opledger/eventstore/postgres/pgmigrate"
)

// migrationFiles holds the schema, one numbered file per change
// (NNN_name.sql). Files are never edited once released; a change is a new file.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationSet applies migrationFiles. The lock (hashtext of
// "opledger.migrate:<schema>") is the one released binaries take: never
// change it, or an old and a new binary could migrate one schema at once.
var migrationSet = pgmigrate.Set{
	Name:      "schema",
	Files:     migrationFiles,
	Dir:       "migrations",
	LockKey:   "opledger.migrate:",
	LockHash:  pgmigrate.HashText,
	Outdated:  ErrSchemaOutdated,
	Interpret: interpretError,
}

// Migration is one embedded schema change.
type Migration = pgmigrate.Migration

// Migrations returns the migrations this binary embeds, in version order.
// Versions are 1..n without gaps; a malformed set is a build bug and is
// reported as an error.
func Migrations() ([]Migration, error) { return migrationSet.Migrations() }

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx all
// satisfy it.
type Beginner = pgmigrate.Beginner

// Migrate brings schema (DefaultSchema when empty) up to the migrations this
// binary embeds, creating the schema if it does not exist, and returns the
// versions it applied (none when the schema was current). Pending migrations
// are applied in one transaction, each recorded in schema.schema_migrations,
// so a failed migration leaves nothing behind. Concurrent Migrate calls on the
// same schema serialize on an advisory lock. Versions in the database that
// this binary does not know (a newer binary migrated it) are left alone.
// Database errors are interpreted as the store's are (an unreachable server
// wraps eventstore.ErrUnavailable).
//
// Migrate is the only thing that creates or changes the schema; Open and New
// never do.
func Migrate(ctx context.Context, db Beginner, schema string) (applied []int, err error) {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return nil, err
	}
	return migrationSet.Apply(ctx, db, schema)
}

// CheckSchema returns nil when the store may serve: its schema holds every
// migration this binary embeds, else an error wrapping ErrSchemaOutdated
// names the missing versions (or says the schema was never migrated); and
// the log's transaction ids are behind the server's, else an error wraps
// ErrLogAheadOfServer (a restore into another cluster). A server should
// refuse to start on either. Connection failures wrap
// eventstore.ErrUnavailable.
func (s *Store) CheckSchema(ctx context.Context) error {
	if err := migrationSet.Check(ctx, s.pool, s.schema); err != nil {
		return err
	}
	return s.checkTransactionIDs(ctx, "check schema "+s.schema)
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
