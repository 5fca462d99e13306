package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// LagRetention is how long lag samples are kept: a day, for the console's
// picture of the last day, and an hour of slack.
const LagRetention = 25 * time.Hour

// LagSourceProjector names the projector's samples; a relay's are
// "relay:" and its name.
const LagSourceProjector = "projector"

// LagSample is how far one source trailed the log in one minute.
type LagSample struct {
	Source string
	At     time.Time // the minute
	Events int64
	Capped bool
	Behind time.Duration
}

// RecordLag stores samples for the minute of at (the ledger's clock): the
// first row of a source's minute stays, so every serve may record and one
// row is kept. Then it deletes samples older than LagRetention before at.
// Bounded: one row per source and minute.
func (r *Reads) RecordLag(ctx context.Context, at time.Time, samples []LagSample) error {
	minute := at.UTC().Truncate(time.Minute)
	for _, s := range samples {
		if _, err := r.db.Exec(ctx, r.sql(`INSERT INTO %[1]s.lag_samples (source, at, events, capped, behind_ms)
VALUES ($1, $2, $3, $4, $5) ON CONFLICT (source, at) DO NOTHING`), s.Source, minute, max(0, s.Events), s.Capped, max(0, s.Behind.Milliseconds())); err != nil {
			return fmt.Errorf("record lag of %s: %w", s.Source, err)
		}
	}
	if _, err := r.db.Exec(ctx, r.sql(`DELETE FROM %[1]s.lag_samples WHERE at < $1`), minute.Add(-LagRetention)); err != nil {
		return fmt.Errorf("forget old lag samples: %w", err)
	}
	return nil
}

// LagHistory returns the samples of [from, to), by source then time:
// at most a row per source and minute, so a day of a projector and two
// relays is about 4,300 rows.
func (r *Reads) LagHistory(ctx context.Context, from, to time.Time) ([]LagSample, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT source, at, events, capped, behind_ms FROM %[1]s.lag_samples
WHERE at >= $1 AND at < $2 ORDER BY source, at`), from, to)
	if err != nil {
		return nil, fmt.Errorf("lag history: %w", err)
	}
	var (
		out    []LagSample
		s      LagSample
		behind int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&s.Source, &s.At, &s.Events, &s.Capped, &behind}, func() error {
		s.At, s.Behind = s.At.UTC(), time.Duration(behind)*time.Millisecond
		out = append(out, s)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("lag history: %w", err)
	}
	return out, nil
}
