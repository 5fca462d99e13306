package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore/postgres"
	"opledger/projections"
)

// readModelRows is the read models a catch-up of the whole log leaves,
// table by table in PostgreSQL's binary COPY format, in the order
// writeRowsSeconds writes them.
type readModelRows struct {
	tables []string
	data   [][]byte
}

// projectRows catches a projector up on the whole log into a schema of its
// own (untimed) and reads back every table it filled.
func projectRows(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, n int) (readModelRows, error) {
	const schema = "bench_projection_rows"
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+ident+` CASCADE`); err != nil {
		return readModelRows{}, err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+ident+` CASCADE`)
	if _, err := projections.Migrate(ctx, pool, schema); err != nil {
		return readModelRows{}, err
	}
	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: schema, Logger: quietLogger()})
	if err != nil {
		return readModelRows{}, err
	}
	if applied, err := p.CatchUp(ctx); err != nil || applied != int64(n) {
		return readModelRows{}, fmt.Errorf("the projector applied %d of %d events: %v", applied, n, err)
	}
	// Every table the catch-up wrote to but its checkpoint's: those rows
	// are the projector's output.
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
WHERE s.nspname = $1 AND c.relkind = 'r' AND c.relname NOT IN ('projection_checkpoints', 'schema_migrations')
ORDER BY c.relname`, schema)
	if err != nil {
		return readModelRows{}, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return readModelRows{}, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return readModelRows{}, err
	}
	defer conn.Release()
	var out readModelRows
	for _, t := range tables {
		var buf bytes.Buffer
		tag, err := conn.Conn().PgConn().CopyTo(ctx, &buf, `COPY `+ident+`.`+pgx.Identifier{t}.Sanitize()+` TO STDOUT (FORMAT binary)`)
		if err != nil {
			return readModelRows{}, fmt.Errorf("read %s: %w", t, err)
		}
		if tag.RowsAffected() > 0 {
			out.tables, out.data = append(out.tables, t), append(out.data, buf.Bytes())
		}
	}
	return out, nil
}

// writeRowsSeconds writes rows into fresh read models (migrated untimed),
// one binary COPY per table in one transaction, as a catch-up's batch
// writes the rows it created: the least the projector's writes of the
// whole log can cost, every index and constraint of the read models
// maintained.
func writeRowsSeconds(ctx context.Context, pool *pgxpool.Pool, rows readModelRows, round int) (float64, error) {
	schema := fmt.Sprintf("bench_projection_floor_%d", round)
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := projections.Migrate(ctx, pool, schema); err != nil {
		return 0, err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+ident+` CASCADE`)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	start := time.Now()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	for i, t := range rows.tables {
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(rows.data[i]), `COPY `+ident+`.`+pgx.Identifier{t}.Sanitize()+` FROM STDIN (FORMAT binary)`); err != nil {
			return 0, fmt.Errorf("write %s: %w", t, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}
