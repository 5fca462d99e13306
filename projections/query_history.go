package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxHistoryRows bounds the rows one history query reads: a window with
// more executions that were ever Unknown than this is drawn from the first
// ones found, and says so (Capped).
const MaxHistoryRows = 10_000

// StateCount is how many operations created in one bucket are in one
// state now.
type StateCount struct {
	Bucket time.Time // the bucket's start
	State  string
	Count  int64
}

// OperationsByState counts the operations created in [from, to) by the
// bucket of their creation (buckets of width step from from) and the state
// they are in now: an index-only scan of operations_created_at_idx.
func (r *Reads) OperationsByState(ctx context.Context, from, to time.Time, step time.Duration) ([]StateCount, error) {
	if step <= 0 || !from.Before(to) {
		return nil, fmt.Errorf("operations by state: want from before to and a positive step")
	}
	rows, err := r.db.Query(ctx, r.sql(`SELECT date_bin($3::interval, created_at, $1) AS bucket, state, count(*)
FROM %[1]s.operations WHERE created_at >= $1 AND created_at < $2 GROUP BY 1, 2 ORDER BY 1, 2`), from, to, step)
	if err != nil {
		return nil, fmt.Errorf("operations by state: %w", err)
	}
	var (
		out []StateCount
		c   StateCount
	)
	if _, err := pgx.ForEachRow(rows, []any{&c.Bucket, &c.State, &c.Count}, func() error {
		c.Bucket = c.Bucket.UTC()
		out = append(out, c)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("operations by state: %w", err)
	}
	return out, nil
}

// DoubtSpan is when one execution was Unknown and when Escalated: Unknown
// from UnknownSince until EscalatedAt or EndedAt, Escalated from
// EscalatedAt until EndedAt (zero: still so).
type DoubtSpan struct {
	UnknownSince, EscalatedAt, EndedAt time.Time
}

// UnknownAt reports whether the execution was Unknown at t.
func (s DoubtSpan) UnknownAt(t time.Time) bool {
	end := s.EscalatedAt
	if end.IsZero() {
		end = s.EndedAt
	}
	return !t.Before(s.UnknownSince) && (end.IsZero() || t.Before(end))
}

// EscalatedAtTime reports whether the execution waited for a person at t.
func (s DoubtSpan) EscalatedAtTime(t time.Time) bool {
	return !s.EscalatedAt.IsZero() && !t.Before(s.EscalatedAt) && (s.EndedAt.IsZero() || t.Before(s.EndedAt))
}

// DoubtSpans returns the spans of the executions that were Unknown or
// Escalated at some time in [from, to): those still so, and those that
// were and ended within the window (through executions_unknown_ended_idx).
// At most MaxHistoryRows; capped is true when there were more.
func (r *Reads) DoubtSpans(ctx context.Context, from, to time.Time) (spans []DoubtSpan, capped bool, err error) {
	rows, err := r.db.Query(ctx, r.sql(`(SELECT unknown_since, escalated_at, ended_at FROM %[1]s.executions
  WHERE state IN ('Unknown', 'Escalated') AND unknown_since < $2 LIMIT $3)
UNION ALL
(SELECT unknown_since, escalated_at, ended_at FROM %[1]s.executions
  WHERE unknown_since IS NOT NULL AND ended_at >= $1 AND unknown_since < $2 LIMIT $3)`), from, to, MaxHistoryRows+1)
	if err != nil {
		return nil, false, fmt.Errorf("executions in doubt: %w", err)
	}
	var unknown, escalated, ended *time.Time
	if _, err := pgx.ForEachRow(rows, []any{&unknown, &escalated, &ended}, func() error {
		var s DoubtSpan
		if unknown != nil {
			s.UnknownSince = unknown.UTC()
		}
		if escalated != nil {
			s.EscalatedAt = escalated.UTC()
		}
		if ended != nil {
			s.EndedAt = ended.UTC()
		}
		spans = append(spans, s)
		return nil
	}); err != nil {
		return nil, false, fmt.Errorf("executions in doubt: %w", err)
	}
	if len(spans) > MaxHistoryRows {
		return spans[:MaxHistoryRows], true, nil
	}
	return spans, false, nil
}
