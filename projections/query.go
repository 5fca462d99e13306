package projections

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds of the query API.
const (
	// MaxQueryLimit bounds the rows one list query returns.
	MaxQueryLimit = 1000
	// DefaultQueryLimit is a page when the caller names no limit.
	DefaultQueryLimit = 100
	// MaxSearchLength bounds a search term (an id: see domain.MaxIDLength,
	// with room for the provider's references).
	MaxSearchLength = 256
)

// Reads is the query API over the read models: every read the HTTP API and
// the console make of the tables this package maintains goes through it, so
// one package owns each table, its columns and its indexes. Lists are keyset
// paged (a cursor names the last row seen, never an offset) and bounded by
// MaxQueryLimit. Times come back in UTC. Rows may trail the log by the
// projection's lag. Safe for concurrent use.
//
// Errors wrap the driver's: a *pgconn.PgError means the server refused the
// statement (a schema that was not migrated, a bug), anything else that the
// database could not be reached.
type Reads struct {
	db     Querier
	schema string
	ident  string // the schema, quoted
}

// NewReads returns the query API over the read models in schema
// (DefaultSchema when empty). It does no I/O.
func NewReads(db Querier, schema string) (*Reads, error) {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("projections: reads: nil database")
	}
	return &Reads{db: db, schema: schema, ident: quoteSchema(schema)}, nil
}

// Schema returns the schema the queries read.
func (r *Reads) Schema() string { return r.schema }

// sql fills the schema into a statement: %[1]s is the quoted schema.
func (r *Reads) sql(stmt string) string { return fmt.Sprintf(stmt, r.ident) }

// Ping checks that the read models answer: the checkpoint table is there.
func (r *Reads) Ping(ctx context.Context) error {
	var n int64
	if err := r.db.QueryRow(ctx, r.sql(`SELECT count(*) FROM %[1]s.projection_checkpoints`)).Scan(&n); err != nil {
		return fmt.Errorf("read models: %w", err)
	}
	return nil
}

// clampQueryLimit turns a caller's limit into one within (0, MaxQueryLimit].
func clampQueryLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultQueryLimit
	case limit > MaxQueryLimit:
		return MaxQueryLimit
	}
	return limit
}

// where collects the conditions and arguments of a statement built from a
// filter; every value is a bound parameter, never spliced into the text.
type where struct {
	conds []string
	args  []any
}

// arg binds v and returns its placeholder.
func (w *where) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) add(cond string) { w.conds = append(w.conds, cond) }

func (w *where) clause() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// utcPtr returns t in UTC, or nil for a NULL.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// TimeCursor is a keyset position over rows ordered by a time and an id:
// the last row a page held. Its text form (String) is opaque to callers.
type TimeCursor struct {
	At time.Time
	ID string
}

// String encodes the cursor for a URL.
func (c TimeCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.At.UTC().Format(time.RFC3339Nano) + "|" + c.ID))
}

// ParseTimeCursor decodes what TimeCursor.String produced; ok is false for
// anything else. The id is checked by valid, when given.
func ParseTimeCursor(text string, valid func(id string) bool) (TimeCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return TimeCursor{}, false
	}
	ts, id, found := strings.Cut(string(raw), "|")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !found || err != nil || id == "" || (valid != nil && !valid(id)) {
		return TimeCursor{}, false
	}
	return TimeCursor{At: at, ID: id}, true
}
