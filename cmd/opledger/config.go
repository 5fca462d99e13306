package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/postgres"
)

// defaultDatabaseURL is where a command looks for Postgres when neither
// DATABASE_URL nor --database-url says otherwise.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// dbConfig is the database settings every Postgres-using command shares.
type dbConfig struct {
	url         string
	storeSchema string
	viewSchema  string
	storeKind   string // "postgres" or "kurrent"
	kurrentURL  string
}

func dbFlags(fs *flag.FlagSet) *dbConfig { return dbFlagsNamed(fs, "schema") }

// dbFlagsNamed is dbFlags with the read models' schema under another flag
// name (for commands whose --schema means something else).
func dbFlagsNamed(fs *flag.FlagSet, viewSchemaFlag string) *dbConfig {
	c := &dbConfig{}
	fs.StringVar(&c.url, "database-url", env("DATABASE_URL", defaultDatabaseURL), "PostgreSQL connection URL [DATABASE_URL]")
	fs.StringVar(&c.storeSchema, "store-schema", env("OPLEDGER_STORE_SCHEMA", postgres.DefaultSchema), "schema of the event store tables [OPLEDGER_STORE_SCHEMA]")
	fs.StringVar(&c.viewSchema, viewSchemaFlag, env("OPLEDGER_SCHEMA", "opledger"), "schema of the read models analysts query [OPLEDGER_SCHEMA]")
	fs.StringVar(&c.storeKind, "store", env("OPLEDGER_STORE", "postgres"), "event store backend: postgres, or kurrent (KurrentDB at KURRENTDB_URL; read models stay in PostgreSQL) [OPLEDGER_STORE]")
	fs.StringVar(&c.kurrentURL, "kurrentdb-url", env("KURRENTDB_URL", ""), "KurrentDB connection string, e.g. esdb://127.0.0.1:2113?tls=false [KURRENTDB_URL]")
	return c
}

// pool opens a pool and checks the server answers; errors never show the
// password.
func (c *dbConfig) pool(ctx context.Context) (*pgxpool.Pool, error) {
	if c.url == "" {
		return nil, errors.New("no database: set DATABASE_URL or --database-url")
	}
	cfg, err := pgxpool.ParseConfig(c.url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL %s is malformed", postgres.RedactURL(c.url))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = postgres.DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(c.url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect %s: %w", postgres.RedactURL(c.url), err)
	}
	return pool, nil
}

// openedStore is an event store with what its owner needs beside the port.
type openedStore struct {
	eventstore.Store
	// Check is the store's health for readiness: reachable, schema current.
	Check func(ctx context.Context) error
	// Release releases what opening it took (the pool is the caller's).
	Release func()
}

// store opens the configured event store: PostgreSQL on pool (refusing an
// outdated schema), or KurrentDB at kurrentURL.
func (c *dbConfig) store(ctx context.Context, pool *pgxpool.Pool) (openedStore, error) {
	switch c.storeKind {
	case "postgres":
		s, err := postgres.New(pool, c.storeSchema)
		if err != nil {
			return openedStore{}, err
		}
		if err := s.CheckSchema(ctx); err != nil {
			return openedStore{}, fmt.Errorf("%w (run 'opledger migrate')", err)
		}
		return openedStore{Store: s, Check: s.CheckSchema, Release: func() {}}, nil
	case "kurrent":
		if c.kurrentURL == "" {
			return openedStore{}, errors.New("--store kurrent needs KURRENTDB_URL or --kurrentdb-url")
		}
		s, err := kurrent.Open(ctx, kurrent.Config{URL: c.kurrentURL})
		if err != nil {
			return openedStore{}, fmt.Errorf("KurrentDB at %s: %w", kurrent.RedactURL(c.kurrentURL), err)
		}
		check := func(ctx context.Context) error { _, err := s.ReadAll(ctx, nil, 1); return err }
		return openedStore{Store: s, Check: check, Release: s.Close}, nil
	}
	return openedStore{}, fmt.Errorf("OPLEDGER_STORE / --store %q: want postgres or kurrent", c.storeKind)
}

// openEventStore opens the event store the settings name and checks its
// schema. The returned func releases it.
func openEventStore(ctx context.Context, c *dbConfig) (eventstore.Store, func(), error) {
	if c.storeKind == "kurrent" { // the log alone: no PostgreSQL needed
		s, err := c.store(ctx, nil)
		if err != nil {
			return nil, nil, err
		}
		return s.Store, s.Release, nil
	}
	pool, err := c.pool(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := c.store(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s.Store, func() { s.Release(); pool.Close() }, nil
}
