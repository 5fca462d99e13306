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
