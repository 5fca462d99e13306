package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
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
// unnests.
type appendBatch struct {
	ids, types     []string
	data, metadata [][]byte
}

// newAppendBatch validates events beyond eventstore.ValidateAppend: ids must
// be UUIDs in canonical lowercase form (the form they are read back in) and
// data and metadata, when present, must be JSON.
func newAppendBatch(stream string, events []eventstore.EventData) (appendBatch, error) {
	b := appendBatch{
		ids:      make([]string, len(events)),
		types:    make([]string, len(events)),
		data:     make([][]byte, len(events)),
		metadata: make([][]byte, len(events)),
	}
	for i, e := range events {
		if !isCanonicalUUID(e.ID) {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d: id %q is not a lowercase canonical UUID", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		if e.Data != nil && !json.Valid(e.Data) {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d (%s): data is not JSON", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		if e.Metadata != nil && !json.Valid(e.Metadata) {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d (%s): metadata is not JSON", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		b.ids[i], b.types[i], b.data[i], b.metadata[i] = e.ID, e.Type, e.Data, e.Metadata
	}
	return b, nil
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

// Append implements eventstore.Store in one statement on the hot path. When
// the statement writes nothing (the expected version did not hold) or hits a
// unique violation (an event id already stored), a second read decides
// between an idempotent retry, which succeeds with the version the first
// attempt returned, and a *eventstore.WrongExpectedVersionError carrying the
// stream's actual version.
//
// Beyond eventstore.ValidateAppend, event ids must be lowercase canonical
// UUIDs and Data and Metadata must be JSON (or nil); Postgres stores them as
// jsonb, so they read back normalized (key order, whitespace), not byte for
// byte.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	batch, err := newAppendBatch(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
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

// appendOnce runs the conditional append statement on q. written is false
// when the expected version did not hold (nothing was written); a unique
// violation comes back as an error wrapping ErrWrongExpectedVersion.
func (s *Store) appendOnce(ctx context.Context, q querier, stream string, expected eventstore.ExpectedVersion, b appendBatch) (next int64, written bool, err error) {
	n := int64(len(b.ids))
	var (
		sql  string
		args = []any{stream, n, b.ids, b.types, b.data, b.metadata, streamLockKey(s.schema, stream)}
	)
	switch v, exact := expected.Version(); {
	case exact:
		sql = s.sql.appendExact
		args = append(args, v)
	case expected.IsNoStream():
		sql = s.sql.appendNoStream
	default:
		sql = s.sql.appendAny
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
	op := "append " + stream
	rows, err := s.pool.Query(ctx, s.sql.settle, stream, b.ids)
	if err != nil {
		return eventstore.AppendResult{}, interpretError(op, err)
	}
	current := eventstore.NoStreamVersion
	stored := make(map[string]int64, len(b.ids)) // event id -> its version in stream
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
		return eventstore.AppendResult{}, interpretError(op, err)
	}
	if next, ok := retried(expected, b.ids, stored); ok {
		return eventstore.AppendResult{NextExpectedVersion: next}, nil
	}
	return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
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
