package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// A catch-up into fresh read models (Rebuild; Projector.CatchUp on a schema
// no event was folded into) builds the secondary indexes once at its end
// instead of row by row: before its first batch it drops them, listing their
// definitions in the schema's pending_indexes table, and after its last it
// creates them again from that list and drops the table. Kept from the
// start: every primary key and unique constraint (they enforce what the
// fold relies on, and its upserts conflict on them), and foldIndexes. The
// definitions are read from the migrated schema itself, so the migrations
// stay the one place that says which indexes the read models have.
//
// While pending_indexes exists the schema is refused (CheckSchema: no
// projector runs on it, serve does not start on it, a swap does not make it
// live); Migrate builds what it lists. A catch-up that stopped half way
// (cancelled, crashed) thus leaves a schema that gets its indexes from the
// next `opledger migrate`, or that is dropped.

// foldIndexes are the secondary indexes the fold's own loads read by
// (statements.go: an operation's executions and capabilities, whether it has
// a skipped event): a catch-up keeps them.
var foldIndexes = []string{"executions_operation_id_idx", "capabilities_operation_id_idx", "skipped_events_operation_id_idx"}

// pendingIndexesTable lists the indexes a catch-up deferred.
const pendingIndexesTable = "pending_indexes"

// indexLockKey serializes deferring and building a schema's indexes.
func indexLockKey(schema string) string { return "opledger.projections.indexes:" + schema }

// deferrableIndexesSQL lists the schema's ($1) indexes that are neither a
// primary key, unique, backing a constraint, nor in $2, with their
// definitions (schema-qualified).
const deferrableIndexesSQL = `SELECT i.relname, pg_get_indexdef(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE n.nspname = $1 AND NOT x.indisunique AND NOT x.indisprimary
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)
  AND i.relname <> ALL ($2::text[])
ORDER BY i.relname`

// deferIndexes drops the deferrable secondary indexes of schema and lists
// them in its pending_indexes table, in one transaction, if no event was
// folded into schema yet (no checkpoint has applied any) and none are
// pending already. It takes the projection's apply lock exclusively, so no
// batch is in flight. It reports whether it deferred them.
func deferIndexes(ctx context.Context, db Beginner, schema, name string) (deferred bool, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("defer indexes: begin: %w", err)
	}
	defer func() {
		if !deferred {
			rollback(ctx, tx)
		}
	}()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0)), pg_advisory_xact_lock(hashtextextended($2, 0))`,
		indexLockKey(schema), applyLockKey(schema, name)); err != nil {
		return false, fmt.Errorf("defer indexes: lock: %w", err)
	}
	ident := quoteSchema(schema)
	var fresh bool
	err = tx.QueryRow(ctx, `SELECT to_regclass($1) IS NULL AND NOT EXISTS (SELECT 1 FROM `+ident+`.projection_checkpoints WHERE events_applied > 0)`,
		ident+"."+pendingIndexesTable).Scan(&fresh)
	if err != nil || !fresh {
		return false, wrapIf("defer indexes: inspect", err)
	}
	rows, err := tx.Query(ctx, deferrableIndexesSQL, schema, foldIndexes)
	if err != nil {
		return false, fmt.Errorf("defer indexes: list: %w", err)
	}
	type index struct{ name, definition string }
	indexes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var ix index
		return ix, r.Scan(&ix.name, &ix.definition)
	})
	if err != nil {
		return false, fmt.Errorf("defer indexes: list: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE `+ident+`.`+pendingIndexesTable+` (
    name       text COLLATE "C" PRIMARY KEY,
    definition text NOT NULL
)`); err != nil {
		return false, fmt.Errorf("defer indexes: %w", err)
	}
	for _, ix := range indexes {
		if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.`+pendingIndexesTable+` (name, definition) VALUES ($1, $2)`, ix.name, ix.definition); err != nil {
			return false, fmt.Errorf("defer indexes: %w", err)
		}
		if _, err := tx.Exec(ctx, `DROP INDEX `+pgx.Identifier{schema, ix.name}.Sanitize()); err != nil {
			return false, fmt.Errorf("defer indexes: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("defer indexes: commit: %w", err)
	}
	return true, nil
}

// buildPendingIndexes creates the indexes schema's pending_indexes lists
// and drops the table, in one transaction; without the table it does
// nothing.
func buildPendingIndexes(ctx context.Context, db Beginner, schema string) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("build indexes: begin: %w", err)
	}
	defer rollback(ctx, tx) // after Commit: a no-op
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, indexLockKey(schema)); err != nil {
		return fmt.Errorf("build indexes: lock: %w", err)
	}
	ident := quoteSchema(schema)
	var pending bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ident+"."+pendingIndexesTable).Scan(&pending); err != nil || !pending {
		return wrapIf("build indexes: inspect", err)
	}
	rows, err := tx.Query(ctx, `SELECT definition FROM `+ident+`.`+pendingIndexesTable+` ORDER BY name`)
	if err != nil {
		return fmt.Errorf("build indexes: %w", err)
	}
	definitions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("build indexes: %w", err)
	}
	for _, d := range definitions {
		if _, err := tx.Exec(ctx, d); err != nil {
			return fmt.Errorf("build indexes: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, `DROP TABLE `+ident+`.`+pendingIndexesTable); err != nil {
		return fmt.Errorf("build indexes: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("build indexes: commit: %w", err)
	}
	return nil
}

// checkNoPendingIndexes returns an error wrapping ErrSchemaOutdated when
// schema lists indexes a catch-up deferred and did not build.
func checkNoPendingIndexes(ctx context.Context, q Querier, schema string) error {
	ident := quoteSchema(schema)
	var pending bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ident+"."+pendingIndexesTable).Scan(&pending); err != nil {
		return fmt.Errorf("inspect %s: %w", schema, err)
	}
	if !pending {
		return nil
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM `+ident+`.`+pendingIndexesTable).Scan(&n); err != nil {
		return fmt.Errorf("inspect %s: %w", schema, err)
	}
	return fmt.Errorf("%w: schema %s: %d secondary indexes a catch-up into it deferred are not built (it stopped before its end): migrate builds them",
		ErrSchemaOutdated, schema, n)
}

// wrapIf wraps err, if any, with what.
func wrapIf(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
