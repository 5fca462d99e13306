package projections

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// statements holds the projector's SQL, addressed to one schema once at
// construction so no batch builds SQL. %[1]s is the quoted schema.
type statements struct {
	ensureCheckpoint, readCheckpoint, lockCheckpoint, writeCheckpoint string
	applyLockShared                                                   string
	loadOperations, loadExecutions, loadCapabilities, loadDeliveries  string
	operations, executions, capabilities, deliveries                  tableStatements
	evidence, reconciliations                                         tableStatements // upsert: insert once
	insertSkipped                                                     string
	loadIncomplete                                                    string
}

// tableStatements write a mutable table's rows: COPY those a batch created
// into table (a conflict is an error) in the order of columns, upsert those
// it changed.
type tableStatements struct {
	table   pgx.Identifier
	columns []string
	copy    string // COPY ... FROM STDIN (FORMAT binary): copybinary.go
	upsert  string
}

const (
	ensureCheckpointSQL = `INSERT INTO %[1]s.projection_checkpoints (name, position, events_applied, updated_at)
VALUES ($1, NULL, 0, $2) ON CONFLICT (name) DO UPDATE SET clock_offset = $2 - now()`
	readCheckpointSQL  = `SELECT position, events_applied FROM %[1]s.projection_checkpoints WHERE name = $1`
	lockCheckpointSQL  = readCheckpointSQL + ` FOR UPDATE`
	writeCheckpointSQL = `UPDATE %[1]s.projection_checkpoints SET position = $2, events_applied = $3, updated_at = $4,
clock_offset = $4 - now() WHERE name = $1`

	// applyLockSharedSQL is taken by every batch transaction, shared; a swap
	// takes it exclusively, so no batch is in flight while schemas are
	// renamed and none starts until the swap has committed. $1 is applyLockKey.
	applyLockSharedSQL = `SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))`

	// The loads return the rows as one JSON array whose keys are the column
	// names (the row types' JSON names). $1 is the batch's operation ids.
	// Each id is looked up in a LATERAL subquery that LIMIT/OFFSET keeps
	// from being flattened into a join, so the plan is an index probe per id
	// whatever the table's statistics say (a table growing during a
	// catch-up is rarely analyzed; a hash join would scan it all).
	loadOperationsSQL = `SELECT coalesce(jsonb_agg(t), '[]') FROM unnest($1::text[]) AS k(id)
CROSS JOIN LATERAL (SELECT * FROM %[1]s.operations o WHERE o.id = k.id LIMIT 1) t`
	loadExecutionsSQL = `SELECT coalesce(jsonb_agg(t), '[]') FROM unnest($1::text[]) AS k(id)
CROSS JOIN LATERAL (SELECT * FROM %[1]s.executions x WHERE x.operation_id = k.id OFFSET 0) t`
	loadCapabilitiesSQL = `SELECT coalesce(jsonb_agg(t), '[]') FROM unnest($1::text[]) AS k(id)
CROSS JOIN LATERAL (SELECT * FROM %[1]s.capabilities c WHERE c.operation_id = k.id OFFSET 0) t`
	// $1 message ids and $2 operation ids, pairwise.
	loadDeliveriesSQL = `SELECT coalesce(jsonb_agg(t), '[]') FROM unnest($1::text[], $2::text[]) AS k(message_id, operation_id)
CROSS JOIN LATERAL (SELECT * FROM %[1]s.deliveries d WHERE d.message_id = k.message_id AND d.operation_id = k.operation_id LIMIT 1) t`
	// loadIncompleteSQL: which of the batch's operations ($1) had an event
	// skipped (skipped_events_operation_id_idx), as a JSON array of ids.
	loadIncompleteSQL = `SELECT coalesce(jsonb_agg(k.id), '[]') FROM unnest($1::text[]) AS k(id)
WHERE EXISTS (SELECT 1 FROM %[1]s.skipped_events s WHERE s.operation_id = k.id)`

	// The writes take the batch's rows of one table as a JSON array ($1);
	// jsonb_populate_recordset maps keys to columns by name and absent keys
	// to NULL. Mutable rows are upserted whole; append-only rows are
	// inserted once (a row already there is the same event's).
	upsertSQL = `INSERT INTO %[1]s.%[2]s SELECT * FROM jsonb_populate_recordset(NULL::%[1]s.%[2]s, $1::jsonb)
ON CONFLICT (%[3]s) DO UPDATE SET (%[4]s) = ROW(%[5]s)`
	insertOnceSQL = `INSERT INTO %[1]s.%[2]s SELECT * FROM jsonb_populate_recordset(NULL::%[1]s.%[2]s, $1::jsonb)
ON CONFLICT (%[3]s) DO NOTHING`
)

// The columns of each table follow from its row type (columns.go): the
// append-only tables COPY writes whole; the mutable ones are upserted on
// their non-key columns, and COPY writes the key columns and then these.
var (
	evidenceColumns       = columnsOf[evidenceRow]()
	reconciliationColumns = columnsOf[reconciliationRow]()
	operationColumns      = nonKey(columnsOf[operationRow](), "id")
	executionColumns      = nonKey(columnsOf[executionRow](), "id")
	capabilityColumns     = nonKey(columnsOf[capabilityRow](), "id")
	deliveryColumns       = nonKey(columnsOf[deliveryRow](), "message_id", "operation_id")
)

func table(schema, table string, key, columns []string) tableStatements {
	excluded := make([]string, len(columns))
	for i, c := range columns {
		excluded[i] = "EXCLUDED." + c
	}
	t := pgx.Identifier{schema, table}
	all := append(slices.Clone(key), columns...)
	return tableStatements{
		table:   t,
		columns: all,
		copy:    copySQL(t, all),
		upsert: fmt.Sprintf(upsertSQL, quoteSchema(schema), table, strings.Join(key, ", "),
			strings.Join(columns, ", "), strings.Join(excluded, ", ")),
	}
}

// appendOnly is an append-only table keyed by event_id: its rows are
// copied in, or (when the batch is applied again, see errRowExists)
// inserted once with insertOnceSQL, held in upsert.
func appendOnly(schema, table string, columns []string) tableStatements {
	t := pgx.Identifier{schema, table}
	return tableStatements{
		table:   t,
		columns: columns,
		copy:    copySQL(t, columns),
		upsert:  fmt.Sprintf(insertOnceSQL, quoteSchema(schema), table, "event_id"),
	}
}

func newStatements(schema string) statements {
	ident := quoteSchema(schema)
	f := func(sql string) string { return fmt.Sprintf(sql, ident) }
	return statements{
		ensureCheckpoint: f(ensureCheckpointSQL),
		readCheckpoint:   f(readCheckpointSQL),
		lockCheckpoint:   f(lockCheckpointSQL),
		writeCheckpoint:  f(writeCheckpointSQL),
		applyLockShared:  applyLockSharedSQL,
		loadOperations:   f(loadOperationsSQL),
		loadExecutions:   f(loadExecutionsSQL),
		loadCapabilities: f(loadCapabilitiesSQL),
		loadDeliveries:   f(loadDeliveriesSQL),
		operations:       table(schema, "operations", []string{"id"}, operationColumns),
		executions:       table(schema, "executions", []string{"id"}, executionColumns),
		capabilities:     table(schema, "capabilities", []string{"id"}, capabilityColumns),
		deliveries:       table(schema, "deliveries", []string{"message_id", "operation_id"}, deliveryColumns),
		evidence:         appendOnly(schema, "evidence", evidenceColumns),
		reconciliations:  appendOnly(schema, "reconciliations", reconciliationColumns),
		insertSkipped:    fmt.Sprintf(insertOnceSQL, ident, "skipped_events", "event_id"),
		loadIncomplete:   f(loadIncompleteSQL),
	}
}

// Lock keys. Advisory locks are database-wide, so the keys name the schema
// as well as the projection.

// leaderLockKey is held, session-level, by the one projector applying
// projection name to schema.
func leaderLockKey(schema, name string) string {
	return "opledger.projections.leader:" + schema + "/" + name
}

// applyLockKey is held shared by each batch transaction and exclusively by a
// swap of schema.
func applyLockKey(schema, name string) string {
	return "opledger.projections.apply:" + schema + "/" + name
}
