package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
	"opledger/domain/recovery"
)

// MaxIndexLimit bounds the rows one Index query returns.
const MaxIndexLimit = 10_000

// Index answers the recovery roles' questions (recovery.Index) from the
// executions read model, each with one query on a partial index. Like every
// index it may lag the log by the projection's lag; the roles re-check each
// candidate against its stream. Times are the read models' (truncated to the
// microsecond). Safe for concurrent use.
type Index struct {
	db                    Querier
	expired, expiredAfter string
	unknown, unknownAfter string
	escalated             string
}

// Each candidate query has a form for the start of its order and one after
// a keyset cursor ($2, $3 or $1, $2: since and execution id), so that both
// are a range scan of the partial index with no OR in the plan.
const (
	// expiredLeasesSQL uses executions_executing_lease_idx.
	expiredLeasesSQL = `SELECT operation_id, id, lease_expires_at FROM %[1]s.executions
WHERE state = 'Executing' AND lease_expires_at <= $1
ORDER BY lease_expires_at, id LIMIT $2`
	expiredLeasesAfterSQL = `SELECT operation_id, id, lease_expires_at FROM %[1]s.executions
WHERE state = 'Executing' AND lease_expires_at <= $1 AND (lease_expires_at, id) > ($2::timestamptz, $3::text)
ORDER BY lease_expires_at, id LIMIT $4`
	// unknownExecutionsSQL uses executions_unknown_since_idx.
	unknownExecutionsSQL = `SELECT operation_id, id, unknown_since FROM %[1]s.executions
WHERE state = 'Unknown'
ORDER BY unknown_since, id LIMIT $1`
	unknownExecutionsAfterSQL = `SELECT operation_id, id, unknown_since FROM %[1]s.executions
WHERE state = 'Unknown' AND (unknown_since, id) > ($1::timestamptz, $2::text)
ORDER BY unknown_since, id LIMIT $3`
	// escalatedExecutionsSQL uses executions_escalated_at_idx.
	escalatedExecutionsSQL = `SELECT operation_id, id, escalated_at FROM %[1]s.executions
WHERE state = 'Escalated'
ORDER BY escalated_at, id LIMIT $1`
)

// NewIndex returns an index over the read models in schema (DefaultSchema
// when empty). It does no I/O.
func NewIndex(db Querier, schema string) (*Index, error) {
	schema = defaultSchema(schema)
	if err := validateSchemaName(schema); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("projections: index: nil database")
	}
	ident := quoteSchema(schema)
	return &Index{
		db:           db,
		expired:      fmt.Sprintf(expiredLeasesSQL, ident),
		expiredAfter: fmt.Sprintf(expiredLeasesAfterSQL, ident),
		unknown:      fmt.Sprintf(unknownExecutionsSQL, ident),
		unknownAfter: fmt.Sprintf(unknownExecutionsAfterSQL, ident),
		escalated:    fmt.Sprintf(escalatedExecutionsSQL, ident),
	}, nil
}

// ExpiredLeases implements recovery.Index: Executing executions whose lease
// expired at or before now, earliest expiry first (then by execution id),
// strictly after the cursor, at most limit (capped at MaxIndexLimit). Since
// is the lease expiry.
func (x *Index) ExpiredLeases(ctx context.Context, now time.Time, after recovery.Cursor, limit int) ([]recovery.ExecutionRef, error) {
	if after.IsStart() {
		return x.query(ctx, "expired leases", x.expired, now, clampLimit(limit))
	}
	return x.query(ctx, "expired leases", x.expiredAfter, now, after.Since, string(after.ExecutionID), clampLimit(limit))
}

// UnknownExecutions implements recovery.Index: Unknown (not Escalated)
// executions, oldest first (by when they became Unknown, then by execution
// id), strictly after the cursor, at most limit (capped at MaxIndexLimit).
// Since is when the execution became Unknown.
func (x *Index) UnknownExecutions(ctx context.Context, after recovery.Cursor, limit int) ([]recovery.ExecutionRef, error) {
	if after.IsStart() {
		return x.query(ctx, "unknown executions", x.unknown, clampLimit(limit))
	}
	return x.query(ctx, "unknown executions", x.unknownAfter, after.Since, string(after.ExecutionID), clampLimit(limit))
}

// EscalatedExecutions lists Escalated executions, a person's queue, earliest
// escalation first, at most limit (capped at MaxIndexLimit). Since is when
// the execution was escalated.
func (x *Index) EscalatedExecutions(ctx context.Context, limit int) ([]recovery.ExecutionRef, error) {
	return x.query(ctx, "escalated executions", x.escalated, clampLimit(limit))
}

func (x *Index) query(ctx context.Context, what, sql string, args ...any) ([]recovery.ExecutionRef, error) {
	if args[len(args)-1].(int) == 0 {
		return nil, nil
	}
	rows, err := x.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("index: %s: %w", what, err)
	}
	refs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (recovery.ExecutionRef, error) {
		var (
			ref    recovery.ExecutionRef
			op, id string
			since  time.Time
		)
		err := row.Scan(&op, &id, &since)
		ref.OperationID, ref.ExecutionID, ref.Since = domain.OperationID(op), domain.ExecutionID(id), since.UTC()
		return ref, err
	})
	if err != nil {
		return nil, fmt.Errorf("index: %s: %w", what, err)
	}
	return refs, nil
}

func clampLimit(limit int) int { return max(0, min(limit, MaxIndexLimit)) }

var _ recovery.Index = (*Index)(nil)
