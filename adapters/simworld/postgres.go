package simworld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

// PostgresStores is a StoreFactory on the PostgreSQL server at url: every
// schedule gets a fresh, migrated schema of its own (sim_<random>), dropped
// when the schedule ends. Close the returned func when the sweep is done.
//
// On PostgreSQL a schedule checks the same invariants, more slowly. Its
// trace is reproducible only while nothing else holds a transaction open on
// the server: readers of the log wait for every older transaction of the
// cluster (see eventstore/postgres), and another session's can make a relay
// or the log index see less at one step than it would at the next.
func PostgresStores(ctx context.Context, url string) (StoreFactory, func(), error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(url), err)
	}
	factory := func(ctx context.Context) (eventstore.Store, func(), error) {
		var b [6]byte
		_, _ = rand.Read(b[:])
		schema := "sim_" + hex.EncodeToString(b[:])
		ident := pgx.Identifier{schema}.Sanitize()
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
			return nil, nil, fmt.Errorf("create schema %s: %w", schema, err)
		}
		drop := func() { _, _ = pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+ident+" CASCADE") }
		if _, err := postgres.Migrate(ctx, pool, schema); err != nil {
			drop()
			return nil, nil, fmt.Errorf("migrate %s: %w", schema, err)
		}
		store, err := postgres.New(pool, schema)
		if err != nil {
			drop()
			return nil, nil, err
		}
		return store, drop, nil
	}
	return factory, pool.Close, nil
}
