package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// querier is what an append statement runs on: the pool, or (in tests) an
// open transaction.
type querier interface {
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
// unnests, with each event's content digest (chain.Content), from which
// its links in the stream's hash chain are computed.
type appendBatch struct {
	ids, types     []string
	data, metadata [][]byte
	contents       []chain.Hash
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
		contents: make([]chain.Hash, len(events)),
	}
	for i, e := range events {
		if !isCanonicalUUID(e.ID) {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d: id %q is not a lowercase canonical UUID", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		content, err := chain.Content(stream, e.ID, e.Type, e.Data, e.Metadata)
		if err != nil {
			return appendBatch{}, fmt.Errorf("append %s: %w: event %d (%s): %w", stream, eventstore.ErrInvalidAppend, i, e.ID, err)
		}
		b.ids[i], b.types[i], b.data[i], b.metadata[i], b.contents[i] = e.ID, e.Type, nilIfEmpty(e.Data), nilIfEmpty(e.Metadata), content
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

// appendRequest is one append ready for the statement: its events, the
// stream's head it expects (version and hash of the event there), and the
// links computed from that head.
type appendRequest struct {
	stream   string
	lockKey  int64
	expected int64 // the version of the stream's last event; NoStreamVersion: no stream
	head     []byte
	b        appendBatch
	// versions, prev and hashes are per event; newHead is the last hash.
	versions     []int64
	prev, hashes [][]byte
	newHead      []byte
	// fence, when set, is the append's condition on another stream
	// (appendOneSQL with appendOneFence alone, CTE f of appendBatchSQL in a group).
	fence *eventstore.Fence
}

// newRequest links b's events after head (for expected NoStreamVersion:
// the genesis value).
func (s *Store) newRequest(stream string, head streamHead, b appendBatch) *appendRequest {
	n := len(b.ids)
	r := &appendRequest{
		stream: stream, lockKey: streamLockKey(s.schema, stream), expected: head.version, head: head.hash, b: b,
		versions: make([]int64, n), prev: make([][]byte, n), hashes: make([][]byte, n),
	}
	links := make([]chain.Hash, 2*n) // one allocation for every prev and hash
	prev := head.prev()
	for i, content := range b.contents {
		v := head.version + 1 + int64(i)
		links[2*i] = prev
		links[2*i+1] = chain.Link(prev, v, content)
		prev = links[2*i+1]
		r.versions[i], r.prev[i], r.hashes[i] = v, links[2*i][:], links[2*i+1][:]
	}
	r.newHead = r.hashes[n-1]
	return r
}

// Append implements eventstore.Store. An append with an exact or no-stream
// expected version whose head this store knows (it read or wrote the event
// at that version; see headCache) is one statement, shared with concurrent
// appends to other streams (group commit, see groupcommit.go): its links
// are computed in Go and the statement checks the stream's row against
// them. An append whose head is unknown reads the row first. When the
// statement writes nothing (the expected version did not hold) or hits a
// unique violation (an event id already stored), a second read decides
// between an idempotent retry, which succeeds with the version the first
// attempt returned (its hashes are the ones stored then: nothing is
// written), and a *eventstore.WrongExpectedVersionError carrying the
// stream's actual version. Expected version Any costs a read first (see
// appendAny).
//
// An append beside a fence (eventstore.ExpectedVersion.Beside) is one
// statement too, in a group like any other: its writes join a read of the
// fence's event in the statement's snapshot (appendOneSQL with appendOneFence alone,
// appendBatchSQL's CTE f in a group),
// so an append written on a server holds a fence that server holds — after
// a failover, the new primary's — and the fenced event, committed before
// the append was decided, precedes it in the WAL: no standby holds the
// append without it. Reading the fence takes no lock: appends to the
// fenced stream never wait on it. When it writes nothing and is no retry,
// one more read tells a fence gone (*eventstore.FenceError) from a wrong
// expected version.
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
	b, err := newAppendBatch(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if f, ok := expected.Fence(); ok && (!isCanonicalUUID(f.EventID) || f.Version < 0) {
		return eventstore.AppendResult{}, &eventstore.FenceError{Stream: stream, Fence: f} // no event this store holds
	}
	if expected.IsAny() {
		return s.appendAny(ctx, stream, expected, b)
	}
	return s.appendAt(ctx, stream, expected, b)
}

// appendAt appends b at an exact or no-stream expected version. With a
// head from the cache it tries the statement at once; if that writes
// nothing although the row is at the expected version and holds none of
// the events, the cached head was not the row's (a row changed behind the
// store's back): it forgets it and tries once more with the row's head.
func (s *Store) appendAt(ctx context.Context, stream string, expected eventstore.ExpectedVersion, b appendBatch) (eventstore.AppendResult, error) {
	want := eventstore.NoStreamVersion
	if v, exact := expected.Version(); exact {
		want = v
	}
	head, known := streamHead{version: eventstore.NoStreamVersion}, true
	if want != eventstore.NoStreamVersion {
		head, known = s.heads.get(stream, want)
	}
	for attempt := 0; ; attempt++ {
		if !known {
			current, headHash, stored, err := s.lookup(ctx, stream, b)
			if err != nil {
				return eventstore.AppendResult{}, err
			}
			if next, ok := retried(expected, b.ids, stored); ok {
				return eventstore.AppendResult{NextExpectedVersion: next}, nil
			}
			if current != want || len(stored) > 0 {
				return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
			}
			head = streamHead{version: current, hash: headHash}
		}
		r := s.newRequest(stream, head, b)
		if f, ok := expected.Fence(); ok {
			r.fence = &f
		}
		written, err := s.group.commit(ctx, r)
		if err != nil && !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			return eventstore.AppendResult{}, err
		}
		next := want + int64(len(b.ids))
		if written {
			s.heads.put(stream, streamHead{version: next, hash: r.newHead, id: b.ids[len(b.ids)-1]})
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		}
		cachedHead := known && attempt == 0 && want != eventstore.NoStreamVersion
		s.heads.forget(stream)
		current, headHash, stored, lerr := s.lookup(ctx, stream, b)
		if lerr != nil {
			return eventstore.AppendResult{}, lerr
		}
		if next, ok := retried(expected, b.ids, stored); ok {
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		}
		if err := s.checkFence(ctx, stream, r.fence); err != nil {
			return eventstore.AppendResult{}, err
		}
		if cachedHead && current < want {
			s.regressed(ctx, eventstore.Regression{Stream: stream, SeenVersion: want, SeenEventID: head.id, HeldVersion: current,
				Detail: fmt.Sprintf("%s ends at version %d; this store had read or written version %d", stream, current, want)})
		}
		if attempt == 0 && err == nil && current == want && len(stored) == 0 && !bytes.Equal(headHash, head.hash) {
			// The version held but the row's head hash is not the one the
			// links were computed from. If the stream holds another event
			// there than the one this store knew, it went back and was
			// written again: the caller decided on what is gone, so the
			// append is refused (it catches up and decides again). Else the
			// row alone changed: link from the row's head.
			if cachedHead && s.rewritten(ctx, stream, head) {
				return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
			}
			head, known = streamHead{version: current, hash: headHash}, true
			continue
		}
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	}
}

// maxAnyAttempts bounds how often an append with expected version Any
// retries after losing a race for the version it found: each lost race
// means another append to the stream succeeded, so only a stream appended
// to faster than this one can append exhausts it.
const maxAnyAttempts = 100

// appendAny runs an append with expected version Any as an exact append at
// the stream's current version and head, read first, so that its links are
// known. The same read settles whether the events are already in the
// stream (a retry, answered as a success again; some but not all of them:
// refused as on the other paths). A lost race is tried again, at most
// maxAnyAttempts times; an id stored in another stream is refused.
func (s *Store) appendAny(ctx context.Context, stream string, expected eventstore.ExpectedVersion, b appendBatch) (eventstore.AppendResult, error) {
	op := "append " + stream
	for range maxAnyAttempts {
		current, headHash, stored, err := s.lookup(ctx, stream, b)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if next, ok := retried(eventstore.Any(), b.ids, stored); ok {
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		}
		if len(stored) > 0 {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: eventstore.Any(), Actual: current}
		}
		r := s.newRequest(stream, streamHead{version: current, hash: headHash}, b)
		if f, ok := expected.Fence(); ok {
			r.fence = &f
		}
		written, err := s.group.commit(ctx, r)
		switch {
		case err == nil && written:
			next := current + int64(len(b.ids))
			s.heads.put(stream, streamHead{version: next, hash: r.newHead, id: b.ids[len(b.ids)-1]})
			return eventstore.AppendResult{NextExpectedVersion: next}, nil
		case errors.Is(err, eventstore.ErrWrongExpectedVersion):
			// A unique violation: unless this very append is stored (a
			// retry whose first attempt just committed), an event id is
			// stored elsewhere.
			after, _, stored, lerr := s.lookup(ctx, stream, b)
			if lerr != nil {
				return eventstore.AppendResult{}, lerr
			}
			if next, ok := retried(eventstore.Any(), b.ids, stored); ok {
				return eventstore.AppendResult{NextExpectedVersion: next}, nil
			}
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: eventstore.Any(), Actual: after}
		case err != nil:
			return eventstore.AppendResult{}, err
		}
		if err := s.checkFence(ctx, stream, r.fence); err != nil {
			return eventstore.AppendResult{}, err
		}
		// Lost the race for the version: read again.
	}
	return eventstore.AppendResult{}, eventstore.Unavailable(op, fmt.Errorf("lost the race for the stream's next version %d times in a row", maxAnyAttempts))
}

// execAppends runs appendBatchSQL (appendOneSQL for a single append) on q
// for rs, appends to distinct streams, and reports which were written. A
// unique violation (an event id already stored, by any of them) fails the
// whole statement and comes back as an error wrapping
// ErrWrongExpectedVersion; nothing was written then.
func (s *Store) execAppends(ctx context.Context, q querier, rs []*appendRequest) ([]bool, error) {
	operation := "append " + rs[0].stream
	if len(rs) > 1 {
		operation = fmt.Sprintf("append to %d streams (%s, ...)", len(rs), rs[0].stream)
	}
	rows, err := s.queryAppends(ctx, q, rs)
	if err != nil {
		return nil, interpretError(operation, err)
	}
	written := make([]bool, len(rs))
	var ai, inserted int64
	_, err = pgx.ForEachRow(rows, []any{&ai, &inserted}, func() error {
		if ai < 1 || int(ai) > len(rs) {
			return fmt.Errorf("bug: the statement reported append %d of %d", ai, len(rs))
		}
		if n := int64(len(rs[ai-1].b.ids)); inserted != n {
			// The stream row moved but not every event was written: the
			// statement's own atomicity is broken. Fail loudly.
			return fmt.Errorf("bug: stream %s advanced by %d but %d events inserted", rs[ai-1].stream, n, inserted)
		}
		written[ai-1] = true
		return nil
	})
	if err != nil {
		return nil, interpretError(operation, err)
	}
	return written, nil
}

// queryAppends sends the statement for rs: appendOneSQL's scalars for one
// append, appendBatchSQL's arrays for more.
func (s *Store) queryAppends(ctx context.Context, q querier, rs []*appendRequest) (pgx.Rows, error) {
	if len(rs) == 1 {
		r := rs[0]
		if f := r.fence; f != nil {
			return q.Query(ctx, s.sql.appendOneFenced, r.lockKey, r.stream, r.expected, int64(len(r.b.ids)), r.head, r.newHead,
				r.versions, r.b.ids, r.b.types, r.b.data, r.b.metadata, r.prev, r.hashes, f.Stream, f.Version, f.EventID)
		}
		return q.Query(ctx, s.sql.appendOne, r.lockKey, r.stream, r.expected, int64(len(r.b.ids)), r.head, r.newHead,
			r.versions, r.b.ids, r.b.types, r.b.data, r.b.metadata, r.prev, r.hashes)
	}
	events := 0
	for _, r := range rs {
		events += len(r.b.ids)
	}
	var (
		keys     = make([]int64, len(rs))
		streams  = make([]string, len(rs))
		fStreams = make([]string, len(rs))
		fVers    = make([]int64, len(rs))
		fIDs     = make([]string, len(rs))
		expected = make([]int64, len(rs))
		counts   = make([]int64, len(rs))
		heads    = make([][]byte, len(rs))
		newHeads = make([][]byte, len(rs))
		index    = make([]int64, 0, events)
		versions = make([]int64, 0, events)
		ids      = make([]string, 0, events)
		types    = make([]string, 0, events)
		data     = make([][]byte, 0, events)
		metadata = make([][]byte, 0, events)
		prev     = make([][]byte, 0, events)
		hashes   = make([][]byte, 0, events)
	)
	for i, r := range rs {
		keys[i], streams[i], expected[i], counts[i], heads[i], newHeads[i] = r.lockKey, r.stream, r.expected, int64(len(r.b.ids)), r.head, r.newHead
		if f := r.fence; f != nil {
			fStreams[i], fVers[i], fIDs[i] = f.Stream, f.Version, f.EventID
		}
		for range r.b.ids {
			index = append(index, int64(i+1))
		}
		versions = append(versions, r.versions...)
		ids = append(ids, r.b.ids...)
		types = append(types, r.b.types...)
		data = append(data, r.b.data...)
		metadata = append(metadata, r.b.metadata...)
		prev = append(prev, r.prev...)
		hashes = append(hashes, r.hashes...)
	}
	slices.Sort(keys) // every batch locks in key order: no two wait on each other in a cycle
	return q.Query(ctx, s.sql.appendBatch, keys, streams, expected, counts, heads, newHeads,
		index, versions, ids, types, data, metadata, prev, hashes, fStreams, fVers, fIDs)
}

// checkFence returns a *eventstore.FenceError when fence f (nil: none) no
// longer holds: the store does not hold its event. It is asked after a
// fenced append wrote nothing and was no retry, to tell a fence gone from
// a wrong expected version.
func (s *Store) checkFence(ctx context.Context, stream string, f *eventstore.Fence) error {
	if f == nil {
		return nil
	}
	var held bool
	if err := s.pool.QueryRow(ctx, s.sql.fence, f.Stream, f.Version, f.EventID).Scan(&held); err != nil {
		return interpretError("append "+stream, err)
	}
	if !held {
		return &eventstore.FenceError{Stream: stream, Fence: *f}
	}
	return nil
}

// lookup reads, in one snapshot, the stream's version and head hash and
// where any of the batch's event ids sit in it (event id -> version).
func (s *Store) lookup(ctx context.Context, stream string, b appendBatch) (int64, []byte, map[string]int64, error) {
	op := "append " + stream
	rows, err := s.pool.Query(ctx, s.sql.settle, stream, b.ids)
	if err != nil {
		return 0, nil, nil, interpretError(op, err)
	}
	current := eventstore.NoStreamVersion
	var head []byte
	stored := make(map[string]int64, len(b.ids))
	var (
		version, eventVersion *int64
		headHash              []byte
		eventID               *string
	)
	_, err = pgx.ForEachRow(rows, []any{&version, &headHash, &eventID, &eventVersion}, func() error {
		if version != nil {
			current, head = *version, headHash
		}
		if eventID != nil && eventVersion != nil {
			stored[*eventID] = *eventVersion
		}
		return nil
	})
	if err != nil {
		return 0, nil, nil, interpretError(op, err)
	}
	return current, head, stored, nil
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
