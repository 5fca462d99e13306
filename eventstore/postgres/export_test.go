package postgres

import (
	"context"
	"errors"
	"fmt"
	"reflect"

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
	b, err := newAppendBatch(stream, events)
	if err != nil {
		return nil, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, interpretError("begin", err)
	}
	// The statement takes the links from the head it expects: read it.
	head := streamHead{version: eventstore.NoStreamVersion}
	err = tx.QueryRow(ctx, "SELECT version, head_hash FROM "+s.ident+".streams WHERE stream_id = $1", stream).Scan(&head.version, &head.hash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, interpretError("read version", err)
	}
	if v, exact := expected.Version(); (exact && v != head.version) || (expected.IsNoStream() && head.version != eventstore.NoStreamVersion) {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("hold-open append: stream at %d, expected %s", head.version, expected)
	}
	written, err := s.execAppends(ctx, tx, []*appendRequest{s.newRequest(stream, head, b)})
	if err != nil || !written[0] {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, errors.Join(errors.New("hold-open append wrote nothing"), err)
	}
	return func() error { return tx.Commit(context.WithoutCancel(ctx)) }, nil
}

// appendExactUnhashedSQL is the exact-version append as it was before the
// hash chain (migration 001's statement): the benchmarks' baseline for what
// hashing costs. It writes NULL hashes; never use it outside benchmarks.
const appendExactUnhashedSQL = `WITH l AS (
    SELECT pg_advisory_xact_lock($7::bigint)
), s AS (
    UPDATE %[1]s.streams SET version = version + $2::bigint
    FROM l
    WHERE stream_id = $1::text AND version = $8::bigint
    RETURNING version
), e AS (
    INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata)
    SELECT $1::text, s.version - $2::bigint + u.ord, u.id, u.type, u.data, u.metadata
    FROM s, unnest($3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS u(id, type, data, metadata, ord)
    ORDER BY u.ord
    RETURNING 1
)
SELECT s.version, (SELECT count(*) FROM e) FROM s`

// AppendUnhashed appends at exact version v (v >= 0) the way the store did
// before the hash chain: no content digests, no chain, one statement. For
// BenchmarkAppendHashing's baseline only.
func (s *Store) AppendUnhashed(ctx context.Context, stream string, v int64, events []eventstore.EventData) (int64, error) {
	ids, types := make([]string, len(events)), make([]string, len(events))
	data, meta := make([][]byte, len(events)), make([][]byte, len(events))
	for i, e := range events {
		ids[i], types[i], data[i], meta[i] = e.ID, e.Type, e.Data, e.Metadata
	}
	var next, inserted int64
	err := s.pool.QueryRow(ctx, fmt.Sprintf(appendExactUnhashedSQL, s.ident), stream, int64(len(events)), ids, types, data, meta,
		streamLockKey(s.schema, stream), v).Scan(&next, &inserted)
	return next, err
}

// QueuedAppends is how many appends wait for a statement.
func (s *Store) QueuedAppends() int {
	return s.group.queued()
}

// ExplainGenericAppends returns the generic plans (plan_cache_mode
// force_generic_plan, as a prepared statement settles on after its first
// executions) of the append statements that read events — the grouped one
// and the fenced one alone — on the store's schema as it is now.
func (s *Store) ExplainGenericAppends(ctx context.Context) (batch, fenced string, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return "", "", err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
		return "", "", err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "RESET plan_cache_mode") }()
	explain := func(sql string, args ...any) (string, error) {
		rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
		if err != nil {
			return "", err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return fmt.Sprint(lines), err
	}
	batch, err = explain(s.sql.appendBatch, []int64{1, 2}, []string{"a", "b"}, []int64{0, -1}, []int64{1, 1}, [][]byte{nil, nil}, [][]byte{{0}, {0}},
		[]int64{1, 2}, []int64{1, 0}, []string{"00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"}, []string{"T", "T"},
		[][]byte{[]byte("{}"), []byte("{}")}, [][]byte{[]byte("{}"), []byte("{}")}, [][]byte{{0}, {0}}, [][]byte{{0}, {0}},
		[]string{"", "s"}, []int64{0, 0}, []string{"", "00000000-0000-0000-0000-000000000003"})
	if err != nil {
		return "", "", err
	}
	fenced, err = explain(s.sql.appendOneFenced, int64(1), "a", int64(0), int64(1), []byte(nil), []byte{0},
		[]int64{1}, []string{"00000000-0000-0000-0000-000000000001"}, []string{"T"}, [][]byte{[]byte("{}")}, [][]byte{[]byte("{}")}, [][]byte{{0}}, [][]byte{{0}},
		"s", int64(0), "00000000-0000-0000-0000-000000000003")
	return batch, fenced, err
}

// QueuedReads is how many stream reads wait for a statement.
func (s *Store) QueuedReads() int {
	return s.reads.queued()
}

// ParamOIDs prepares each of the store's statements on one connection and
// returns the types PostgreSQL gave their parameters, by statement.
func (s *Store) ParamOIDs(ctx context.Context) (map[string][]uint32, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	out := map[string][]uint32{}
	v := reflect.ValueOf(s.sql)
	for i := range v.NumField() {
		sd, err := conn.Conn().Prepare(ctx, "", v.Field(i).String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.Type().Field(i).Name, err)
		}
		out[v.Type().Field(i).Name] = sd.ParamOIDs
	}
	return out, nil
}
