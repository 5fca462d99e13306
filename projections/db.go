package projections

import "opledger/eventstore/postgres/pgmigrate"

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx all
// satisfy it.
type Beginner = pgmigrate.Beginner

// Querier runs statements: *pgxpool.Pool, *pgx.Conn and pgx.Tx all satisfy
// it.
type Querier = pgmigrate.Querier

// DB is what the projections need from a database handle: a *pgxpool.Pool
// (or a *pgx.Conn, for tools that hold a single connection).
type DB interface {
	Beginner
	Querier
}
