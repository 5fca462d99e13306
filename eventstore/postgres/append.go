package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// querier is what an append statement runs on: the pool, or (in tests) an
// open transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// streamLockKey is the advisory lock key appends to stream in schema take
// (see statements.go): 64-bit FNV-1a of schema, a NUL, and stream.
func streamLockKey(schema, stream string) int64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(stream))
	return int64(h.Sum64())
}

// appendBatch is an append's events as the column arrays the statement
// unnests, with each event's content digest (chain.Content), which the
// statement links into the stream's hash chain.
type appendBatch struct {
	ids, types     []string
	data, metadata [][]byte
	contents       [][]byte
}

// newAppendBatch validates events beyond eventstore.ValidateAppend: ids must
// be UUIDs in canonical lowercase form (the form they are read back in) and
// data and metadata, when present, must be JSON that chain.Canonicalize
// accepts (so that the hash computed now is the one recomputed from what
// jsonb returns). Empty data or metadata is stored as NULL.
func newAppendBatch(stream string, events []eventstore.EventData) (appendBatch, error) {
	b := appendBatch{
		ids:      make([]string, len(events)),
		types:    make([]string, len(events)),
		data:     make([][]byte, len(events)),
		metadata: make([][]byte, len(events)),
		contents: make([][]byte, len(events)),
	}
	for i, e := range events {
		if !isCanonicalUUID(e.ID) {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d: id %q is not a lowercase canonical UUID", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		content, err := chain.Content(stream, e.ID, e.Type, e.Data, e.Metadata)
		if err != nil {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d (%s): %w", stream, eventstore.ErrInvalidAppend, i, e.ID, err)
		}
		b.ids[i], b.types[i], b.data[i], b.metadata[i], b.contents[i] = e.ID, e.Type, nilIfEmpty(e.Data), nilIfEmpty(e.Metadata), content[:]
	}
	return b, nil
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// isCanonicalUUID reports whether s is 8-4-4-4-12 lowercase hex digits.
func isCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// Append implements eventstore.Store in one statement on the hot path (an
// exact or no-stream expected version), which also links the events into
// the stream's hash chain from the head hash in the streams row. When the
// statement writes nothing (the expected version did not hold) or hits a
// unique violation (an event id already stored), a second read decides
// between an idempotent retry, which succeeds with the version the first
// attempt returned (its hashes are the ones stored then: nothing is
// written), and a *eventstore.WrongExpectedVersionError carrying the
// stream's actual version. Expected version Any costs a read first (see
// appendAny).
//
// Beyond eventstore.ValidateAppend, event ids must be lowercase canonical
// UUIDs and Data and Metadata must be JSON that chain.Canonicalize accepts
// (or nil); Postgres stores them as jsonb, so they read back normalized
// (key order, whitespace), not byte for byte, and their hashes are over
// their canonical form, which is the same either way.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	batch, err := newAppendBatch(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if expected.IsAny() {
		return s.appendAny(ctx, stream, batch)
	}
	next, written, err := s.appendOnce(ctx, s.pool, stream, expected, batch)
	switch {
	case err == nil && written:
		return eventstore.AppendResult{NextExpectedVersion: next}, nil
	case err == nil, errors.Is(err, eventstore.ErrWrongExpectedVersion):
		return s.settle(ctx, stream, expected, batch)
	default:
		return eventstore.AppendResult{}, err
	}
}

// maxAnyAttempts bounds how often an append with expected version Any
// retries after losing a race for the version it found: each lost race
// means another append to the stream succeeded, so only a stream appended
// to faster than this one can append exhausts it.
const maxAnyAttempts = 100

// appendAny runs an append with expected version Any as an exact append at
// the stream's current version, so that the statement knows the versions
// it hashes. Before each attempt it settles whether the events are already
// in the stream (a retry, answered as a success again; some but not all of
// them: refused as on the other paths). A lost race is tried again, at
// most maxAnyAttempts times; an id stored in another stream is refused.
func (s *Store) appendAny(ctx context.Context, stream string, b appendBatch) (eventstore.AppendResult, error) {
	op := "append " + stream
	for range maxAnyAttempts {
		current, stored, err := s.lookup(ctx, stream, b)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if next, ok := retried(eventstore.Any(), b.ids, stored); ok {
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		}
		if len(stored) > 0 {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: eventstore.Any(), Actual: current}
		}
		next, written, err := s.appendOnce(ctx, s.pool, stream, eventstore.Exact(current), b)
		switch {
		case err == nil && written:
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		case err != nil && !errors.Is(err, eventstore.ErrWrongExpectedVersion):
			return eventstore.AppendResult{}, err
		}
		after, stored, err := s.lookup(ctx, stream, b)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if after == current && len(stored) == 0 {
			// The version held, so the refusal was a unique violation: an
			// event id stored in another stream.
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: eventstore.Any(), Actual: current}
		}
	}
	return eventstore.AppendResult{}, eventstore.Unavailable(op, fmt.Errorf("lost the race for the stream's next version %d times in a row", maxAnyAttempts))
}

// appendOnce runs the conditional append statement on q, for an exact or
// no-stream expected version. written is false when the expected version
// did not hold (nothing was written); a unique violation comes back as an
// error wrapping ErrWrongExpectedVersion.
func (s *Store) appendOnce(ctx context.Context, q querier, stream string, expected eventstore.ExpectedVersion, b appendBatch) (next int64, written bool, err error) {
	n := int64(len(b.ids))
	var (
		sql  string
		args = []any{stream, n, b.ids, b.types, b.data, b.metadata, streamLockKey(s.schema, stream),
			b.contents, []byte(chain.LinkTag), chain.Genesis[:]}
	)
	switch v, exact := expected.Version(); {
	case exact:
		sql = s.sql.appendExact
		args = append(args, v)
	case expected.IsNoStream():
		sql = s.sql.appendNoStream
	default:
		return 0, false, fmt.Errorf("append %s: bug: appendOnce with expected version %s", stream, expected)
	}
	op := "append " + stream
	var inserted int64
	if err := q.QueryRow(ctx, sql, args...).Scan(&next, &inserted); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false, nil
		}
		return 0, false, interpretError(op, err)
	}
	if inserted != n {
		// The stream row moved but not every event was written: the
		// statement's own atomicity is broken. Fail loudly.
		return 0, false, fmt.Errorf("%s: bug: stream advanced by %d but %d events inserted", op, n, inserted)
	}
	return next, true, nil
}

// settle is the slow path after an append wrote nothing. If every event id
// already sits in stream at the versions this append would have given them,
// the append was a retry of one that succeeded (its acknowledgement lost):
// report that success again. Otherwise report the stream's actual version.
func (s *Store) settle(ctx context.Context, stream string, expected eventstore.ExpectedVersion, b appendBatch) (eventstore.AppendResult, error) {
	current, stored, err := s.lookup(ctx, stream, b)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if next, ok := retried(expected, b.ids, stored); ok {
		return eventstore.AppendResult{NextExpectedVersion: next}, nil
	}
	return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
}

// lookup reads, in one snapshot, the stream's version and where any of the
// batch's event ids sit in it (event id -> version).
func (s *Store) lookup(ctx context.Context, stream string, b appendBatch) (int64, map[string]int64, error) {
	op := "append " + stream
	rows, err := s.pool.Query(ctx, s.sql.settle, stream, b.ids)
	if err != nil {
		return 0, nil, interpretError(op, err)
	}
	current := eventstore.NoStreamVersion
	stored := make(map[string]int64, len(b.ids))
	var (
		version, eventVersion *int64
		eventID               *string
	)
	_, err = pgx.ForEachRow(rows, []any{&version, &eventID, &eventVersion}, func() error {
		if version != nil {
			current = *version
		}
		if eventID != nil && eventVersion != nil {
			stored[*eventID] = *eventVersion
		}
		return nil
	})
	if err != nil {
		return 0, nil, interpretError(op, err)
	}
	return current, stored, nil
}

// retried reports whether ids sit in the stream consecutively, starting
// where expected would have put the first one (anywhere, for Any), and if so
// the version of the last.
func retried(expected eventstore.ExpectedVersion, ids []string, stored map[string]int64) (int64, bool) {
	start, ok := stored[ids[0]]
	if !ok {
		return 0, false
	}
	switch v, exact := expected.Version(); {
	case exact && start != v+1:
		return 0, false
	case expected.IsNoStream() && start != 0:
		return 0, false
	}
	for k, id := range ids {
		if at, ok := stored[id]; !ok || at != start+int64(k) {
			return 0, false
		}
	}
	return start + int64(len(ids)) - 1, true
}
