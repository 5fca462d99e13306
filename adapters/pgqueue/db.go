package pgqueue

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Querier runs statements: *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is what this package needs of a database handle (a *pgxpool.Pool).
type DB interface {
	Beginner
	Querier
}
