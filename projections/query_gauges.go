package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ExecutionsByState counts executions per state (Executing, Completed,
// NotApplied, Unknown, Escalated): the /metrics gauge. It scans the table's
// state column once; a state with no execution is absent.
func (r *Reads) ExecutionsByState(ctx context.Context) (map[string]int64, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT state, count(*) FROM %[1]s.executions GROUP BY state`))
	if err != nil {
		return nil, fmt.Errorf("count executions by state: %w", err)
	}
	counts := map[string]int64{}
	var (
		state string
		n     int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error {
		counts[state] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("count executions by state: %w", err)
	}
	return counts, nil
}

// OldestUnknown returns when the longest-Unknown execution became Unknown
// (through executions_unknown_since_idx); found is false when none is.
func (r *Reads) OldestUnknown(ctx context.Context) (since time.Time, found bool, err error) {
	err = r.db.QueryRow(ctx, r.sql(`SELECT unknown_since FROM %[1]s.executions WHERE state = 'Unknown' ORDER BY unknown_since LIMIT 1`)).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the oldest Unknown execution: %w", err)
	}
	return since.UTC(), true, nil
}

// OldestEscalated returns when the longest-waiting Escalated execution was
// handed to a person (through executions_escalated_at_idx); found is false
// when none waits.
func (r *Reads) OldestEscalated(ctx context.Context) (since time.Time, found bool, err error) {
	err = r.db.QueryRow(ctx, r.sql(`SELECT escalated_at FROM %[1]s.executions WHERE state = 'Escalated' ORDER BY escalated_at LIMIT 1`)).Scan(&since)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the oldest Escalated execution: %w", err)
	}
	return since.UTC(), true, nil
}

// MaxPastLeaseCounted bounds how many overdue executions PastLease counts:
// a sweeper that stopped during heavy traffic leaves many, and the count is
// an alarm, not an inventory.
const MaxPastLeaseCounted = 10_000

// PastLease counts the executions still Executing whose lease expired
// before now (the ledger's clock), up to MaxPastLeaseCounted, and returns
// the earliest such expiry (zero when none). The sweeper turns a lapsed
// lease Unknown within seconds, so an overdue execution that stays means
// the sweeper is not doing its work — or the read models trail the log.
// Through executions_executing_lease_idx.
func (r *Reads) PastLease(ctx context.Context, now time.Time) (count int64, earliest time.Time, err error) {
	var first *time.Time
	err = r.db.QueryRow(ctx, r.sql(`SELECT count(*), min(lease_expires_at) FROM (
		SELECT lease_expires_at FROM %[1]s.executions WHERE state = 'Executing' AND lease_expires_at < $1
		ORDER BY lease_expires_at LIMIT $2) overdue`), now, MaxPastLeaseCounted).Scan(&count, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count executions past their lease: %w", err)
	}
	if first != nil {
		earliest = first.UTC()
	}
	return count, earliest, nil
}
