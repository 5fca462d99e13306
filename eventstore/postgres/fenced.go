package postgres

import (
	"context"
	"errors"

	"opledger/eventstore"
)

// appendFenced appends b at expected (any of its kinds) beside fence f, in
// one transaction: it reads the stream's head and where b's ids sit in it
// (a retry of an append already written succeeds again, whatever became
// of the fence), checks that the fenced stream holds f's event, and runs
// the append statement (appendOneSQL: the stream's advisory lock, its row
// checked against the head just read). The fence is read in the
// transaction that writes: an append written on a server holds a fence
// that server holds — after a failover, the new primary's — and, the
// fenced event having been committed before the append was decided, the
// WAL carries them in that order, so no standby can hold the append
// without the fence's event. Reading the fence takes no lock: appends to
// the fenced stream never wait on it. It does not use the head cache or
// group commit: a fenced append (evidence beside an operation) is not on
// the hot path.
func (s *Store) appendFenced(ctx context.Context, stream string, expected eventstore.ExpectedVersion, f eventstore.Fence, b appendBatch) (eventstore.AppendResult, error) {
	op := "append " + stream
	if !isCanonicalUUID(f.EventID) || f.Version < 0 {
		return eventstore.AppendResult{}, &eventstore.FenceError{Stream: stream, Fence: f} // no event this store holds
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return eventstore.AppendResult{}, interpretError(op, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // after Commit: a no-op
	current, headHash, stored, err := s.lookupOn(ctx, tx, stream, b)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if next, ok := retried(expected, b.ids, stored); ok {
		return eventstore.AppendResult{NextExpectedVersion: next}, nil
	}
	if len(stored) > 0 {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	}
	var held bool
	if err := tx.QueryRow(ctx, s.sql.fence, f.Stream, f.Version, f.EventID).Scan(&held); err != nil {
		return eventstore.AppendResult{}, interpretError(op, err)
	}
	if !held {
		return eventstore.AppendResult{}, &eventstore.FenceError{Stream: stream, Fence: f}
	}
	if !expected.Matches(current) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	}
	r := s.newRequest(stream, streamHead{version: current, hash: headHash}, b)
	written, err := s.execAppends(ctx, tx, []*appendRequest{r})
	switch {
	case errors.Is(err, eventstore.ErrWrongExpectedVersion): // an id stored meanwhile
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	case err != nil:
		return eventstore.AppendResult{}, err
	case !written[0]: // another append to the stream won the race
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current + 1}
	}
	if err := tx.Commit(ctx); err != nil {
		return eventstore.AppendResult{}, eventstore.Unavailable(op, err)
	}
	next := current + int64(len(b.ids))
	s.heads.put(stream, streamHead{version: next, hash: r.newHead, id: b.ids[len(b.ids)-1]})
	return eventstore.AppendResult{NextExpectedVersion: next}, nil
}
