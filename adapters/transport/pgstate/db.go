package pgstate

import "opledger/eventstore/postgres/pgmigrate"

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx
// satisfy it.
type Beginner = pgmigrate.Beginner

// Querier runs statements: *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Querier = pgmigrate.Querier
