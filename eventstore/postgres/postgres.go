// Package postgres is the PostgreSQL backend of eventstore.Store, on pgx v5.
//
// The schema lives in a schema of its own (DefaultSchema unless configured)
// and is created and upgraded only by Migrate; Open and New never touch it,
// and CheckSchema tells a server whether it may start.
//
// Ordering. Every event row carries the id of the transaction that wrote it
// (xid8, pg_current_xact_id()). ReadAll returns rows in (transaction_id,
// global_position) order and only rows whose transaction id is below the
// xmin of the reader's snapshot, i.e. below every transaction that may still
// commit. So a reader that checkpoints the Position of the last event it
// received never skips an event, however commits interleave; the price is
// that one long-open transaction anywhere in the cluster holds readers back
// until it ends.
//
// Appends are one statement: a per-stream advisory lock, then the stream's
// row in streams (written conditionally on the expected version and head
// hash), then the events. Appends to one stream therefore serialize, and a
// failed condition writes nothing. Concurrent appends to different streams
// share one statement and one commit (group commit, groupcommit.go), each
// with its own condition and result. Append never sends NOTIFY.
//
// Hash chain. Every event row carries prev_hash and event_hash, and every
// streams row the head_hash of its last event (migration 002); Append
// computes the links in Go (package chain) from the head hash of the
// stream's row, which the statement checks; the store remembers the last
// head it read or wrote per stream (bounded), so an append after a read
// needs no other round trip. Rows written before migration 002 carry NULL:
// stored before hashing began.
package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore"
	"opledger/eventstore/postgres/pgmigrate"
)

// Defaults applied by Config.
const (
	// DefaultSchema is the schema the store's tables live in when none is
	// configured.
	DefaultSchema = "opledger_store"
	// DefaultMaxConns bounds the pool when Config.MaxConns is zero.
	DefaultMaxConns int32 = 10
	// DefaultConnectTimeout bounds establishing one connection (dial, TLS,
	// authentication) when neither Config.ConnectTimeout nor the URL's
	// connect_timeout says otherwise, so an unreachable server fails fast.
	DefaultConnectTimeout = 5 * time.Second
)

// Config configures Open.
type Config struct {
	// URL is a libpq connection string: a postgres:// URL or key=value pairs.
	// Required. It is never printed with its password (see RedactURL).
	URL string
	// Schema holds the store's tables. Default DefaultSchema.
	Schema string
	// MaxConns bounds the connection pool. Default DefaultMaxConns.
	MaxConns int32
	// ConnectTimeout bounds establishing one connection. Default: the URL's
	// connect_timeout if it has one, else DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Group commit (see groupcommit.go): at most MaxGroupAppends appends
	// and MaxGroupEvents events share one statement, and at most
	// MaxAppendsInFlight statements run at once. Defaults
	// DefaultMaxGroupAppends, DefaultMaxGroupEvents,
	// DefaultMaxAppendsInFlight; MaxGroupAppends 1 turns grouping off.
	MaxGroupAppends, MaxGroupEvents, MaxAppendsInFlight int
	// Group read (see groupread.go): at most MaxGroupReads stream reads
	// share one statement, and at most MaxReadsInFlight stream-read
	// statements run at once. Defaults DefaultMaxGroupReads,
	// DefaultMaxReadsInFlight; MaxGroupReads 1 turns grouping off.
	MaxGroupReads, MaxReadsInFlight int
	// HeadCacheEntries bounds the streams whose head the store remembers
	// (default DefaultHeadCacheEntries).
	HeadCacheEntries int
}

func (c *Config) setDefaults() {
	c.Schema = defaultSchema(c.Schema)
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.MaxGroupAppends = cmp.Or(c.MaxGroupAppends, DefaultMaxGroupAppends)
	c.MaxGroupEvents = cmp.Or(c.MaxGroupEvents, DefaultMaxGroupEvents)
	c.MaxAppendsInFlight = cmp.Or(c.MaxAppendsInFlight, DefaultMaxAppendsInFlight)
	c.MaxGroupReads = cmp.Or(c.MaxGroupReads, DefaultMaxGroupReads)
	c.MaxReadsInFlight = cmp.Or(c.MaxReadsInFlight, DefaultMaxReadsInFlight)
	c.HeadCacheEntries = cmp.Or(c.HeadCacheEntries, DefaultHeadCacheEntries)
}

func (c *Config) validate() error {
	if c.URL == "" {
		return errors.New("postgres config: URL is required")
	}
	if err := validateSchemaName(c.Schema); err != nil {
		return err
	}
	if c.MaxConns < 1 {
		return fmt.Errorf("postgres config: MaxConns is %d, must be at least 1", c.MaxConns)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("postgres config: ConnectTimeout is %s, must not be negative", c.ConnectTimeout)
	}
	if c.MaxGroupAppends < 1 || c.MaxGroupEvents < 1 || c.MaxAppendsInFlight < 1 || c.HeadCacheEntries < 1 {
		return fmt.Errorf("postgres config: MaxGroupAppends (%d), MaxGroupEvents (%d), MaxAppendsInFlight (%d) and HeadCacheEntries (%d) must be positive",
			c.MaxGroupAppends, c.MaxGroupEvents, c.MaxAppendsInFlight, c.HeadCacheEntries)
	}
	if c.MaxGroupReads < 1 || c.MaxReadsInFlight < 1 {
		return fmt.Errorf("postgres config: MaxGroupReads (%d) and MaxReadsInFlight (%d) must be positive", c.MaxGroupReads, c.MaxReadsInFlight)
	}
	return nil
}

func defaultSchema(schema string) string { return cmp.Or(schema, DefaultSchema) }

func validateSchemaName(schema string) error {
	if err := pgmigrate.ValidateSchemaName(schema); err != nil {
		return fmt.Errorf("postgres config: %w", err)
	}
	return nil
}

// Store is the Postgres event store. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool   // Close closes pool only if Open created it
	schema   string // unquoted, for messages
	ident    string // quoted for SQL, e.g. "opledger_store"
	sql      statements
	heads    *headCache
	group    *groupCommitter
	reads    *groupReader
	// observer is told of the regressions the head cache notices (nil:
	// none is told; the cache drops the entry either way).
	observer atomic.Pointer[eventstore.RegressionObserver]
}

// Open connects a pool to cfg.URL and checks that the server answers, within
// the connect timeout. An unreachable server is reported as an error wrapping
// eventstore.ErrUnavailable; bad configuration as a plain error. Open does
// not create or check the schema: run Migrate to create it and CheckSchema to
// verify it.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	poolCfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// The parse error may quote the URL; say which one without its password.
		return nil, fmt.Errorf("postgres config: cannot parse URL %s", RedactURL(cfg.URL))
	}
	poolCfg.MaxConns = cfg.MaxConns
	poolCfg.ConnConfig.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, poolCfg.ConnConfig.ConnectTimeout, DefaultConnectTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, interpretError("open "+RedactURL(cfg.URL), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, interpretError("open "+RedactURL(cfg.URL), err)
	}
	s := newStore(pool, cfg)
	s.ownsPool = true
	return s, nil
}

// New returns a store on a pool the caller owns: Close then leaves the pool
// open. schema is DefaultSchema when empty; group commit and the head cache
// take their defaults (see Config). New does no I/O.
func New(pool *pgxpool.Pool, schema string) (*Store, error) {
	cfg := Config{URL: "(caller's pool)", Schema: schema}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, errors.New("postgres: nil pool")
	}
	return newStore(pool, cfg), nil
}

func newStore(pool *pgxpool.Pool, cfg Config) *Store {
	ident := pgx.Identifier{cfg.Schema}.Sanitize()
	s := &Store{pool: pool, schema: cfg.Schema, ident: ident, sql: newStatements(ident), heads: newHeadCache(cfg.HeadCacheEntries)}
	s.group = newGroupCommitter(s, cfg.MaxGroupAppends, cfg.MaxGroupEvents, cfg.MaxAppendsInFlight)
	s.reads = newGroupReader(s, cfg.MaxGroupReads, cfg.MaxReadsInFlight)
	return s
}

// Schema returns the name of the schema the store reads and writes.
func (s *Store) Schema() string { return s.schema }

// Close implements eventstore.Store. It closes the pool if Open created it,
// waiting for connections in use to be released, and calls after that fail
// with eventstore.ErrUnavailable. A pool handed to New is left to its owner.
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
	}
}

// ParsePosition implements eventstore.Store; see the package-level
// ParsePosition.
func (s *Store) ParsePosition(text string) (eventstore.Position, error) {
	p, err := ParsePosition(text)
	if err != nil {
		return nil, err
	}
	return p, nil
}

var (
	_ eventstore.Store      = (*Store)(nil)
	_ eventstore.HeadReader = (*Store)(nil)
)
