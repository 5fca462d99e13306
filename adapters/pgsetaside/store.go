package pgsetaside

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/domain/setaside"
	"opledger/eventstore/postgres/pgmigrate"
)

// Store keeps the loops' failing items in the set_aside table of the
// transport schema (pgstate.Migrate creates it there: a projection rebuild
// replaces the read-model schema and must not forget them). It implements
// setaside.Store and is safe for concurrent use. Times are the callers'
// (the ledger's clock), not the database's.
type Store struct {
	db  pgmigrate.Querier
	sql setAsideStatements
}

// New returns the set-aside store of the transport schema schema
// (pgstate.DefaultSchema when empty) on db. It does no I/O; the schema must
// have been migrated.
func New(db pgmigrate.Querier, schema string) (*Store, error) {
	schema, err := pgstate.Schema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pgsetaside: nil database")
	}
	return &Store{db: db, sql: newSetAsideStatements(schema)}, nil
}

const setAsideColumns = `role, item, operation_id, reason, detail, attempts, first_failed_at, last_failed_at, retry_at, set_aside_at`

// SQL of the set-aside store, %[1]s standing for the quoted schema.
const (
	// sqlFail counts one failure in one statement: $8 is MaxAttempts, $9 and
	// $10 the backoff and its cap in milliseconds; the n-th failure waits
	// min(backoff * 2^(n-1), cap).
	sqlFail = `INSERT INTO %[1]s.set_aside AS s (` + setAsideColumns + `)
VALUES ($1, $2, NULLIF($3, ''), $4, $5, 1, $6::timestamptz, $6::timestamptz, $6::timestamptz + $9::float8 * interval '1 millisecond',
        CASE WHEN $8::int <= 1 THEN $6::timestamptz END)
ON CONFLICT (role, item) DO UPDATE SET
    operation_id   = COALESCE(EXCLUDED.operation_id, s.operation_id),
    reason         = EXCLUDED.reason,
    detail         = EXCLUDED.detail,
    attempts       = s.attempts + 1,
    last_failed_at = EXCLUDED.last_failed_at,
    retry_at       = $7::timestamptz + least($10::float8, $9::float8 * power(2, s.attempts)) * interval '1 millisecond',
    set_aside_at   = COALESCE(s.set_aside_at, CASE WHEN s.attempts + 1 >= $8::int THEN $7::timestamptz END)
RETURNING ` + setAsideColumns
	sqlClearSetAside = `DELETE FROM %[1]s.set_aside WHERE role = $1 AND item = $2`
	sqlHeld          = `SELECT ` + setAsideColumns + ` FROM %[1]s.set_aside
WHERE role = $1 AND item = ANY($2::text[]) AND (set_aside_at IS NOT NULL OR retry_at > $3::timestamptz)`
	sqlGetSetAside  = `SELECT ` + setAsideColumns + ` FROM %[1]s.set_aside WHERE role = $1 AND item = $2`
	sqlListSetAside = `SELECT ` + setAsideColumns + ` FROM %[1]s.set_aside
WHERE ($1::text = '' OR role = $1::text) AND (NOT $2::bool OR set_aside_at IS NOT NULL)
  AND (NOT $3::bool OR (first_failed_at, role, item) > ($4::timestamptz, $5::text, $6::text))
ORDER BY first_failed_at, role, item LIMIT $7`
	sqlCountSetAside = `SELECT role, count(*) FILTER (WHERE set_aside_at IS NOT NULL), count(*) FILTER (WHERE set_aside_at IS NULL)
FROM %[1]s.set_aside GROUP BY role ORDER BY role`
)

type setAsideStatements struct{ fail, clear, held, get, list, count string }

func newSetAsideStatements(schema string) setAsideStatements {
	ident := pgx.Identifier{schema}.Sanitize()
	f := func(q string) string { return fmt.Sprintf(q, ident) }
	return setAsideStatements{fail: f(sqlFail), clear: f(sqlClearSetAside), held: f(sqlHeld), get: f(sqlGetSetAside),
		list: f(sqlListSetAside), count: f(sqlCountSetAside)}
}

// Fail implements setaside.Store.
func (s *Store) Fail(ctx context.Context, f setaside.Failure, p setaside.Policy) (setaside.Item, error) {
	if err := setaside.CheckFailure(f); err != nil {
		return setaside.Item{}, err
	}
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return setaside.Item{}, err
	}
	detail, _ := domain.EvidenceText(f.Detail, setaside.MaxDetailBytes)
	reason, _ := domain.EvidenceText(f.Reason, domain.MaxIDLength)
	op, _ := domain.EvidenceText(string(f.OperationID), domain.MaxIDLength)
	at := f.At.UTC()
	it, err := scanItem(s.db.QueryRow(ctx, s.sql.fail, string(f.Role), f.Item, op, reason, detail, at, at,
		p.MaxAttempts, float64(p.Backoff.Milliseconds()), float64(p.MaxBackoff.Milliseconds())))
	if err != nil {
		return setaside.Item{}, fmt.Errorf("set aside %s %s: %w", f.Role, f.Item, err)
	}
	return it, nil
}

// Clear implements setaside.Store.
func (s *Store) Clear(ctx context.Context, role setaside.Role, item string) error {
	if _, err := s.db.Exec(ctx, s.sql.clear, string(role), item); err != nil {
		return fmt.Errorf("clear set-aside %s %s: %w", role, item, err)
	}
	return nil
}

// Held implements setaside.Store.
func (s *Store) Held(ctx context.Context, role setaside.Role, items []string, now time.Time) (map[string]setaside.Item, error) {
	if len(items) > setaside.MaxHeldBatch {
		return nil, fmt.Errorf("%w: %d items asked about, at most %d", setaside.ErrInvalid, len(items), setaside.MaxHeldBatch)
	}
	out := map[string]setaside.Item{}
	if len(items) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, s.sql.held, string(role), items, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("held %s items: %w", role, err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (setaside.Item, error) { return scanItem(r) })
	if err != nil {
		return nil, fmt.Errorf("held %s items: %w", role, err)
	}
	for _, it := range list {
		out[it.Item] = it
	}
	return out, nil
}

// Get implements setaside.Store.
func (s *Store) Get(ctx context.Context, role setaside.Role, item string) (setaside.Item, bool, error) {
	it, err := scanItem(s.db.QueryRow(ctx, s.sql.get, string(role), item))
	if errors.Is(err, pgx.ErrNoRows) {
		return setaside.Item{}, false, nil
	}
	if err != nil {
		return setaside.Item{}, false, fmt.Errorf("get set-aside %s %s: %w", role, item, err)
	}
	return it, true, nil
}

// List implements setaside.Store.
func (s *Store) List(ctx context.Context, q setaside.Query) ([]setaside.Item, error) {
	limit, err := setaside.LimitOf(q)
	if err != nil {
		return nil, err
	}
	var after setaside.Item
	if q.After != nil {
		after = *q.After
	}
	rows, err := s.db.Query(ctx, s.sql.list, string(q.Role), q.SetAsideOnly, q.After != nil,
		after.FirstFailedAt.UTC(), string(after.Role), after.Item, limit)
	if err != nil {
		return nil, fmt.Errorf("list set-aside items: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (setaside.Item, error) { return scanItem(r) })
	if err != nil {
		return nil, fmt.Errorf("list set-aside items: %w", err)
	}
	return items, nil
}

// Counts implements setaside.Store.
func (s *Store) Counts(ctx context.Context) ([]setaside.Count, error) {
	rows, err := s.db.Query(ctx, s.sql.count)
	if err != nil {
		return nil, fmt.Errorf("count set-aside items: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (setaside.Count, error) {
		var c setaside.Count
		var role string
		err := r.Scan(&role, &c.SetAside, &c.Retrying)
		c.Role = setaside.Role(role)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("count set-aside items: %w", err)
	}
	return counts, nil
}

func scanItem(row pgx.Row) (setaside.Item, error) {
	var (
		it         setaside.Item
		role       string
		op         *string
		setAsideAt *time.Time
	)
	err := row.Scan(&role, &it.Item, &op, &it.Reason, &it.Detail, &it.Attempts, &it.FirstFailedAt, &it.LastFailedAt, &it.RetryAt, &setAsideAt)
	if err != nil {
		return setaside.Item{}, err
	}
	it.Role = setaside.Role(role)
	it.OperationID = domain.OperationID(cmp.Or(deref(op), ""))
	if setAsideAt != nil {
		it.SetAside, it.SetAsideAt = true, setAsideAt.UTC()
	}
	it.FirstFailedAt, it.LastFailedAt, it.RetryAt = it.FirstFailedAt.UTC(), it.LastFailedAt.UTC(), it.RetryAt.UTC()
	return it, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

var _ setaside.Store = (*Store)(nil)
