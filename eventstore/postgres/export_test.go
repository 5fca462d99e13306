package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// HoldOpenAppend runs Append's statement inside an explicit transaction on a
// connection of its own and leaves the transaction open: the events hold
// their transaction id and global positions but are not committed until
// commit is called. It exists for the conformance suite's commit-order test.
func (s *Store) HoldOpenAppend(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (commit func() error, err error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return nil, err
	}
	batch, err := newAppendBatch(stream, events)
	if err != nil {
		return nil, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, interpretError("begin", err)
	}
	if expected.IsAny() { // appendOnce takes exact versions: find the current one
		current := eventstore.NoStreamVersion
		err := tx.QueryRow(ctx, "SELECT version FROM "+s.ident+".streams WHERE stream_id = $1", stream).Scan(&current)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			return nil, interpretError("read version", err)
		}
		expected = eventstore.Exact(current)
	}
	if _, written, err := s.appendOnce(ctx, tx, stream, expected, batch); err != nil || !written {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, errors.Join(errors.New("hold-open append wrote nothing"), err)
	}
	return func() error { return tx.Commit(context.WithoutCancel(ctx)) }, nil
}
