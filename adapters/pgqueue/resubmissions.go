package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
)

// Resubmissions is the transport.ResubmissionLog in the transport schema,
// for dead-letter queues that cannot mark their own entries (Kafka). Safe
// for concurrent use.
type Resubmissions struct {
	db  Querier
	sql statements
}

// NewResubmissions returns the log of schema (DefaultSchema when empty).
func NewResubmissions(db Querier, schema string) (*Resubmissions, error) {
	schema, err := pgstate.Schema(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pgqueue: nil database")
	}
	return &Resubmissions{db: db, sql: newStatements(schema)}, nil
}

// Begin implements transport.ResubmissionLog: it records r (unpublished)
// unless its dead letter has a record already, and returns the record that
// stands and whether it was already there.
func (l *Resubmissions) Begin(ctx context.Context, r transport.Resubmission) (transport.Resubmission, bool, error) {
	// Two tries: a concurrent Begin for the same dead letter can make the
	// statement see neither its own insert nor the other's row.
	for range 2 {
		var (
			out   transport.Resubmission
			fresh bool
		)
		err := l.db.QueryRow(ctx, l.sql.beginResubmission, r.DeadLetterID, string(r.MessageID), r.By, false).
			Scan(&out.DeadLetterID, &out.MessageID, &out.By, &out.At, &out.Published, &fresh)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return out, false, fmt.Errorf("record resubmission of %s: %w", r.DeadLetterID, err)
		}
		return out, !fresh, nil
	}
	return transport.Resubmission{}, false, fmt.Errorf("record resubmission of %s: concurrent resubmission, try again", r.DeadLetterID)
}

// Done implements transport.ResubmissionLog.
func (l *Resubmissions) Done(ctx context.Context, deadLetterID string) error {
	if _, err := l.db.Exec(ctx, l.sql.doneResubmission, deadLetterID); err != nil {
		return fmt.Errorf("mark resubmission of %s published: %w", deadLetterID, err)
	}
	return nil
}

// Lookup implements transport.ResubmissionLog.
func (l *Resubmissions) Lookup(ctx context.Context, ids []string) (map[string]transport.Resubmission, error) {
	rows, err := l.db.Query(ctx, l.sql.lookupResu, ids)
	if err != nil {
		return nil, fmt.Errorf("look up resubmissions: %w", err)
	}
	defer rows.Close()
	out := make(map[string]transport.Resubmission, len(ids))
	for rows.Next() {
		var r transport.Resubmission
		if err := rows.Scan(&r.DeadLetterID, &r.MessageID, &r.By, &r.At, &r.Published); err != nil {
			return nil, fmt.Errorf("look up resubmissions: %w", err)
		}
		out[r.DeadLetterID] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look up resubmissions: %w", err)
	}
	return out, nil
}

var _ transport.ResubmissionLog = (*Resubmissions)(nil)
