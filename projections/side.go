package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Side schemas are read models beside the live ones: the as-of views
// Rebuild builds without Swap, and rebuilds that failed before their swap.
// Nothing moves them on and nothing drops them by itself; ListSchemas shows
// them and DropSideSchema removes one.

// MaxListedSchemas bounds ListSchemas: a database holding more read-model
// schemas than this is listed in part (the oldest names first).
const MaxListedSchemas = 1000

// SchemaInfo is one schema holding read models.
type SchemaInfo struct {
	Name string
	// Live is true for the live read models' schema.
	Live bool
	// Checkpoint is the projection's position there ("" before any event)
	// and EventsApplied the events it folded; Updated is when it last moved.
	Checkpoint    string
	EventsApplied int64
	Updated       time.Time
}

// ListSchemas returns every schema that holds read models (a
// projection_checkpoints table beside an operations table): live (the
// defaults when empty) first, then the others by name, at most
// MaxListedSchemas.
func ListSchemas(ctx context.Context, db Querier, live string) ([]SchemaInfo, error) {
	live = defaultSchema(live)
	rows, err := db.Query(ctx, `SELECT c.table_schema FROM information_schema.tables c
  JOIN information_schema.tables o ON o.table_schema = c.table_schema AND o.table_name = 'operations'
 WHERE c.table_name = 'projection_checkpoints'
 ORDER BY c.table_schema <> $1, c.table_schema LIMIT $2`, live, MaxListedSchemas)
	if err != nil {
		return nil, fmt.Errorf("list read-model schemas: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list read-model schemas: %w", err)
	}
	out := make([]SchemaInfo, 0, len(names))
	for _, name := range names {
		info := SchemaInfo{Name: name, Live: name == live}
		var pos *string
		err := db.QueryRow(ctx, `SELECT position, events_applied, updated_at FROM `+quoteSchema(name)+`.projection_checkpoints WHERE name = $1`,
			DefaultName).Scan(&pos, &info.EventsApplied, &info.Updated)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
			continue // dropped since it was listed (undefined_table, invalid_schema_name)
		}
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("read the checkpoint of %s: %w", name, err)
		}
		if pos != nil {
			info.Checkpoint = *pos
		}
		out = append(out, info)
	}
	return out, nil
}

// DropSideSchema drops schema, a side schema of read models: it refuses
// live (the defaults when empty) and any schema that does not hold read
// models (an event store's, the transport's, anyone else's).
func DropSideSchema(ctx context.Context, db Querier, live, schema string) error {
	live = defaultSchema(live)
	if err := validateSchemaName(schema); err != nil {
		return err
	}
	if schema == live {
		return fmt.Errorf("schema %s holds the live read models: it is never dropped here (a rebuild with swap replaces it)", schema)
	}
	var tables int
	err := db.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1
   AND table_name IN ('projection_checkpoints', 'operations')`, schema).Scan(&tables)
	if err != nil {
		return fmt.Errorf("inspect schema %s: %w", schema, err)
	}
	if tables != 2 {
		return fmt.Errorf("schema %s does not hold read models (no projection_checkpoints and operations tables): not dropped", schema)
	}
	var leading bool
	err = db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted
   AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0))`, leaderLockKey(schema, DefaultName)).Scan(&leading)
	if err != nil {
		return fmt.Errorf("inspect schema %s: %w", schema, err)
	}
	if leading {
		return fmt.Errorf("schema %s is another deployment's live read models: a projector holds its leader lock; not dropped", schema)
	}
	if _, err := db.Exec(ctx, `DROP SCHEMA `+quoteSchema(schema)+` CASCADE`); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}
