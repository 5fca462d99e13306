package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Bounds.
const (
	// MaxMessageIDLength bounds a message id, in bytes.
	MaxMessageIDLength = 256
	// DefaultRetention is how long a handled id is kept by default.
	DefaultRetention = 30 * 24 * time.Hour
	// MaxPruneBatch bounds the ids one pruning statement deletes, so that
	// pruning never holds many row locks or a long transaction.
	MaxPruneBatch = 10_000
)

// Errors.
var (
	// ErrInvalidMessageID: an empty, too long, non-UTF-8 or NUL-holding id.
	ErrInvalidMessageID = errors.New("inbox: invalid message id")
	// ErrCommitUnknown: the commit failed in a way that leaves unknown
	// whether it took effect (the connection broke during COMMIT). Do not
	// acknowledge the message: its redelivery is Duplicate if the commit
	// took effect, and is handled if it did not.
	ErrCommitUnknown = errors.New("inbox: commit outcome unknown")
)

// Config configures an Inbox. Zero values take defaults.
type Config struct {
	// Schema and Table name the inbox table (defaults "public" and
	// "inbox"). They are quoted as identifiers, never interpolated raw.
	Schema, Table string
	// Consumer names the consumer whose ids these are. Required.
	Consumer string
	// Retention is how long a handled id is kept before Prune may delete
	// it (default DefaultRetention, at least a minute).
	Retention time.Duration
	// Now is the clock handled_at and Prune's cutoff are read from
	// (default time.Now).
	Now func() time.Time
}

// Inbox records handled message ids. Safe for concurrent use; it holds no
// connection.
type Inbox struct {
	cfg   Config
	table string // quoted schema.table
	index string // quoted index name
	// SQL, built once from the quoted names.
	insertSQL, seenSQL, pruneSQL string
}

// New validates cfg.
func New(cfg Config) (*Inbox, error) {
	cfg.Schema = cmp.Or(cfg.Schema, "public")
	cfg.Table = cmp.Or(cfg.Table, "inbox")
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var errs []error
	if cfg.Consumer == "" || !utf8.ValidString(cfg.Consumer) || strings.ContainsRune(cfg.Consumer, 0) || len(cfg.Consumer) > MaxMessageIDLength {
		errs = append(errs, fmt.Errorf("Consumer must be a name of 1..%d bytes of UTF-8 without NUL", MaxMessageIDLength))
	}
	for _, n := range []string{cfg.Schema, cfg.Table} {
		if !utf8.ValidString(n) || strings.ContainsRune(n, 0) || len(n) > 63 {
			errs = append(errs, fmt.Errorf("%q is not a PostgreSQL identifier (1..63 bytes, no NUL)", n))
		}
	}
	if cfg.Retention < time.Minute {
		errs = append(errs, fmt.Errorf("Retention %s is shorter than a minute", cfg.Retention))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("inbox config: %w", err)
	}
	i := &Inbox{cfg: cfg, table: pgx.Identifier{cfg.Schema, cfg.Table}.Sanitize(),
		index: pgx.Identifier{cfg.Table + "_handled_at_idx"}.Sanitize()}
	i.insertSQL = `INSERT INTO ` + i.table + ` (consumer, message_id, handled_at) VALUES ($1, $2, $3) ON CONFLICT (consumer, message_id) DO NOTHING`
	i.seenSQL = `SELECT EXISTS (SELECT 1 FROM ` + i.table + ` WHERE consumer = $1 AND message_id = $2)`
	i.pruneSQL = `DELETE FROM ` + i.table + ` t USING (SELECT consumer, message_id FROM ` + i.table +
		` WHERE consumer = $1 AND handled_at < $2 ORDER BY handled_at LIMIT $3 FOR UPDATE SKIP LOCKED) doomed` +
		` WHERE t.consumer = doomed.consumer AND t.message_id = doomed.message_id`
	return i, nil
}

// Consumer is the consumer's name.
func (i *Inbox) Consumer() string { return i.cfg.Consumer }

// Retention is how long handled ids are kept.
func (i *Inbox) Retention() time.Duration { return i.cfg.Retention }

// DDL is the SQL that creates the inbox table and its index, for a
// consumer's own migrations (idempotent: IF NOT EXISTS).
func (i *Inbox) DDL() string {
	return `CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{i.cfg.Schema}.Sanitize() + `;
CREATE TABLE IF NOT EXISTS ` + i.table + ` (
    consumer   text        NOT NULL,
    message_id text        NOT NULL,
    handled_at timestamptz NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS ` + i.index + ` ON ` + i.table + ` (consumer, handled_at);`
}

// Execer runs a statement: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, arguments ...any) (pgconn.CommandTag, error)
}

// Querier reads a row: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction: a *pgxpool.Pool or a *pgx.Conn.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Migrate runs DDL.
func (i *Inbox) Migrate(ctx context.Context, db Execer) error {
	if _, err := db.Exec(ctx, i.DDL()); err != nil {
		return fmt.Errorf("inbox: migrate %s: %w", i.table, err)
	}
	return nil
}

// Result says what became of a message.
type Result int

const (
	// Handled: the id was new; fn ran and (with Handle) committed.
	Handled Result = iota + 1
	// Duplicate: the id was recorded already; fn did not run.
	Duplicate
)

func (r Result) String() string {
	switch r {
	case Handled:
		return "handled"
	case Duplicate:
		return "duplicate"
	}
	return "none"
}

// Func is a message's handling: the business change, written through tx.
// An error rolls the transaction back (nothing of it and no record stays).
type Func func(ctx context.Context, tx pgx.Tx) error

// Handle handles the message msgID once: in one new transaction of db it
// records msgID, first, then runs fn and commits. If msgID was recorded
// already it rolls back and answers Duplicate without running fn. A
// concurrent Handle of the same id on another connection waits for this
// transaction to end. Errors from fn, and a panic, roll everything back;
// acknowledge the message to its transport only after Handle returned
// Handled or Duplicate. A failed commit whose outcome is unknown wraps
// ErrCommitUnknown.
func (i *Inbox) Handle(ctx context.Context, db Beginner, msgID string, fn Func) (Result, error) {
	if err := checkID(msgID); err != nil {
		return 0, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("inbox: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op once committed
	res, err := i.HandleTx(ctx, tx, msgID, fn)
	if err != nil || res == Duplicate {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		if pgconn.SafeToRetry(err) {
			return 0, fmt.Errorf("inbox: commit %s: %w", msgID, err)
		}
		return 0, fmt.Errorf("%w: %s: %w", ErrCommitUnknown, msgID, err)
	}
	return Handled, nil
}

// HandleTx is Handle inside the caller's transaction tx: it records msgID
// and runs fn when msgID is new, and answers Duplicate (having written
// nothing) when it is not. The caller commits; until then a concurrent
// duplicate waits. When fn fails, tx is left for the caller to roll back.
func (i *Inbox) HandleTx(ctx context.Context, tx pgx.Tx, msgID string, fn Func) (Result, error) {
	if err := checkID(msgID); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, i.insertSQL, i.cfg.Consumer, msgID, i.cfg.Now())
	if err != nil {
		return 0, fmt.Errorf("inbox: record %s: %w", msgID, err)
	}
	if tag.RowsAffected() == 0 {
		return Duplicate, nil
	}
	if err := fn(ctx, tx); err != nil {
		return 0, fmt.Errorf("inbox: handle %s: %w", msgID, err)
	}
	return Handled, nil
}

// Seen reports whether msgID is recorded as handled (and not pruned).
func (i *Inbox) Seen(ctx context.Context, db Querier, msgID string) (bool, error) {
	var seen bool
	if err := db.QueryRow(ctx, i.seenSQL, i.cfg.Consumer, msgID).Scan(&seen); err != nil {
		return false, fmt.Errorf("inbox: seen %s: %w", msgID, err)
	}
	return seen, nil
}

// PruneBatch deletes at most batch (1..MaxPruneBatch) of this consumer's
// ids handled longer than Retention ago, oldest first, in one statement;
// rows another pruner holds are skipped. It returns how many it deleted.
func (i *Inbox) PruneBatch(ctx context.Context, db Execer, batch int) (int64, error) {
	if batch < 1 || batch > MaxPruneBatch {
		return 0, fmt.Errorf("inbox: prune batch %d, want 1..%d", batch, MaxPruneBatch)
	}
	tag, err := db.Exec(ctx, i.pruneSQL, i.cfg.Consumer, i.cfg.Now().Add(-i.cfg.Retention), batch)
	if err != nil {
		return 0, fmt.Errorf("inbox: prune %s: %w", i.table, err)
	}
	return tag.RowsAffected(), nil
}

// Prune runs PruneBatch until a batch deletes fewer than batch ids, or
// ctx ends. It returns how many it deleted in all. The loop is bounded by
// the ids past the retention: they grow only as fast as the consumer
// handled messages a retention ago, so a pruner that keeps up stops after
// one short batch.
func (i *Inbox) Prune(ctx context.Context, db Execer, batch int) (int64, error) {
	var total int64
	for {
		n, err := i.PruneBatch(ctx, db, batch)
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

func checkID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty", ErrInvalidMessageID)
	case len(id) > MaxMessageIDLength:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidMessageID, len(id), MaxMessageIDLength)
	case !utf8.ValidString(id) || strings.ContainsRune(id, 0):
		return fmt.Errorf("%w: %q is not UTF-8 text without NUL", ErrInvalidMessageID, id)
	}
	return nil
}
