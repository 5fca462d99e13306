package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/cmd/opledger/internal/settings"
	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/postgres"
)

// newFlags is the flag set of command cmd (settings.New).
var newFlags = settings.New

// storeSettings are what a command that opens the event store binds.
var storeSettings = []*settings.Setting{settings.DatabaseURL, settings.Store, settings.KurrentURL, settings.StoreSchema}

// dbConfig is the database settings of one command, read from its flags
// (the settings it did not bind stay empty).
type dbConfig struct {
	f           *settings.Flags
	url         string
	storeSchema string
	viewSchema  string
	transport   string
	storeKind   string // "postgres" or "kurrent"
	kurrentURL  string
}

// dbFrom reads the database settings f bound.
func dbFrom(f *settings.Flags) *dbConfig {
	c := &dbConfig{f: f, storeKind: "postgres"}
	text := func(s *settings.Setting) string {
		if f.Has(s) {
			return f.Text(s)
		}
		return ""
	}
	c.url = text(settings.DatabaseURL)
	c.storeSchema = text(settings.StoreSchema)
	c.viewSchema = text(settings.ReadModelSchema)
	c.transport = text(settings.TransportSchema)
	c.kurrentURL = text(settings.KurrentURL)
	if f.Has(settings.Store) {
		c.storeKind = f.Text(settings.Store)
	}
	return c
}

// where names the database for a message: its URL without the password and
// where the URL came from.
func (c *dbConfig) where() string {
	switch c.f.Source(settings.DatabaseURL) {
	case settings.FromFlag:
		return postgres.RedactURL(c.url) + " (--database-url)"
	case settings.FromEnv:
		return postgres.RedactURL(c.url) + " (DATABASE_URL)"
	}
	return postgres.RedactURL(c.url) + " (the default; set DATABASE_URL or --database-url)"
}

// pool opens a pool and checks the server answers. Its errors are one line
// and never show the password.
func (c *dbConfig) pool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.url)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL %s is malformed", c.where())
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = postgres.DefaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, &connectError{where: c.where(), err: err}
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, &connectError{where: c.where(), err: err}
	}
	return pool, nil
}

// connectError is a failed connection to PostgreSQL, said in one line: the
// server (password redacted) and the innermost cause. pgx's own message
// lists every address and fallback it tried, each on a line of its own,
// and repeats the same dial error for each.
type connectError struct {
	where string
	err   error
}

func (e *connectError) Error() string {
	return "cannot connect to PostgreSQL at " + e.where + ": " + connectCause(e.err)
}

func (e *connectError) Unwrap() error { return e.err }

// connectCause is the one line that says why a connection failed.
func connectCause(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity + ": " + pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "no answer within the connect timeout"
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimSuffix(strings.TrimSpace(line), ":")
}

// migrateHint is the migrate command that would create what this command
// looked for: the schema flags it used, with their values.
func (c *dbConfig) migrateHint() string {
	hint := "opledger migrate"
	if c.f.Source(settings.DatabaseURL) == settings.FromFlag {
		hint += " --database-url '" + postgres.RedactURL(c.url) + "'"
	}
	for _, p := range []struct{ flag, value string }{
		{settings.StoreSchema.FlagFor("migrate"), c.storeSchema},
		{settings.ReadModelSchema.FlagFor("migrate"), c.viewSchema},
		{settings.TransportSchema.FlagFor("migrate"), c.transport},
	} {
		if p.value != "" {
			hint += " --" + p.flag + " " + p.value
		}
	}
	return hint
}

// outdated adds to a schema check's error what to run.
func (c *dbConfig) outdated(err error) error {
	return fmt.Errorf("%w: run '%s'", err, c.migrateHint())
}

// openedStore is an event store with what its owner needs beside the port.
type openedStore struct {
	eventstore.Store
	// Check is the store's health for readiness: reachable, schema current.
	Check func(ctx context.Context) error
	// Replication tells whether its writes are synchronously replicated;
	// nil for a store that cannot tell (KurrentDB).
	Replication eventstore.ReplicationProbe
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
			if errors.Is(err, postgres.ErrSchemaOutdated) {
				return openedStore{}, c.outdated(err)
			}
			return openedStore{}, err
		}
		return openedStore{Store: s, Check: s.CheckSchema, Replication: s, Release: func() {}}, nil
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
