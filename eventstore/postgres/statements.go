package postgres

import "fmt"

// statements holds the store's SQL, addressed to its schema once at
// construction so no call builds SQL.
//
// Event ids are parameters of type text (text[]) cast to uuid in the
// statement: pgx encodes a Go string as a uuid only in text format, after
// trying binary and formatting the failure (the whole array in the error
// text) on every call; as text they are encoded in binary at once. The
// store checks each id is a canonical UUID before sending it.
type statements struct {
	appendBatch, appendOne     string
	appendOneFenced            string
	settle, fence              string
	readStream, readStreams    string
	readAll, head              string
	readHeads                  string
	loadSnapshot, saveSnapshot string
}

// appendBatchSQL appends for one or more appends to distinct streams in one
// statement, and so in one transaction and one commit (group commit, see
// groupcommit.go). Each append keeps its own condition: its stream's row is
// updated (exact version) or inserted (no stream) only if the condition
// holds, and its events are inserted only if its row was written. An append
// whose condition failed writes nothing and is simply absent from the
// result; the others are written regardless.
//
// Ordering. The statement first takes a transaction-scoped advisory lock on
// every stream of the batch (CTE l, keys sorted in Go so that two batches
// never wait on each other in a cycle), and every write joins l's one row,
// so no write, and so no transaction id, happens before all the locks are
// held. A transaction gets its xid at its first write, and Postgres can
// assign it before the write waits for a competing writer of the same row
// (an upsert's speculative insert, racing to create a stream, takes an xid,
// waits for the winner, then appends after it with the older xid: the
// storetest StreamOrder test catches this). Taking a lock needs no xid, so
// an append gets its xid only once every earlier append to each of its
// streams has committed or aborted, and a stream's versions appear in the
// global log in version order. The key is derived from schema and stream
// in Go (streamLockKey); a hash collision only serializes two streams'
// appends. The streams rows are written before the events (e reads w).
//
// Hash chain. The links (package chain: prev and hash per event, and each
// stream's new head) are computed in Go from the head the caller expects,
// the hash of the event at the expected version, and the update is
// conditional on the row's head_hash being that hash as well as on its
// version: so the stored chain is exactly chain.Link's fold from the row's
// head, as if the statement had computed it. The row's head is rechecked by
// Postgres on its latest version (READ COMMITTED re-evaluates the WHERE of
// an UPDATE on a row changed since the snapshot), and versions only grow.
//
// Parameters:
//
//	$1 lock keys (bigint[], sorted)
//	per append: $2 stream ids, $3 expected versions (-1: no stream),
//	    $4 event counts, $5 expected head hashes (NULL: none or pre-hashing),
//	    $6 new head hashes
//	per event:  $7 append index (1-based), $8 versions, $9 ids (text[]),
//	    $10 types, $11 data (jsonb[]), $12 metadata (jsonb[]),
//	    $13 prev hashes, $14 hashes
//	per append: $15 fenced streams ('' when none), $16 fence versions,
//	    $17 fence event ids (text)
//
// Fences. An append beside a fence (eventstore.Fence) is written only
// while the fenced stream holds the fence's event at its version, read in
// the statement's snapshot (CTE f, which every write of the append joins):
// see appendOneSQL with appendOneFence. An append without one passes an empty fenced stream and is in f.
//
// The result is one row per written append: (append index, events
// inserted for it).
const (
	appendBatchSQL = `WITH l AS (
    SELECT count(pg_advisory_xact_lock(k)) AS locked FROM unnest($1::bigint[]) AS k
), a AS (
    SELECT * FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::bytea[], $6::bytea[], $15::text[], $16::bigint[], $17::text[])
        WITH ORDINALITY AS a(stream_id, expected, n, head, new_head, fence_stream, fence_version, fence_id, ai)
), f AS (
    SELECT a.ai FROM a WHERE a.fence_stream = ''
    UNION ALL
    SELECT a.ai FROM a CROSS JOIN LATERAL (
        SELECT 1 FROM %[1]s.events fe
        WHERE fe.event_id = NULLIF(a.fence_id, '')::uuid AND fe.stream_id = a.fence_stream AND fe.stream_version = a.fence_version
        LIMIT 1) AS held
    WHERE a.fence_stream <> ''
), su AS (
    UPDATE %[1]s.streams st SET version = a.expected + a.n, head_hash = a.new_head
    FROM a JOIN f ON f.ai = a.ai, l
    WHERE a.expected >= 0 AND st.stream_id = a.stream_id AND st.version = a.expected
      AND st.head_hash IS NOT DISTINCT FROM a.head
    RETURNING a.ai
), si AS (
    INSERT INTO %[1]s.streams (stream_id, version, head_hash)
    SELECT a.stream_id, a.n - 1, a.new_head FROM a JOIN f ON f.ai = a.ai, l WHERE a.expected < 0
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING stream_id
), w AS (
    SELECT ai FROM su
    UNION ALL
    SELECT a.ai FROM si JOIN a ON a.stream_id = si.stream_id AND a.expected < 0
), e AS (
    INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata, prev_hash, event_hash)
    SELECT a.stream_id, u.version, u.id, u.type, u.data, u.metadata, u.prev, u.hash
    FROM unnest($7::bigint[], $8::bigint[], $9::text[]::uuid[], $10::text[], $11::jsonb[], $12::jsonb[], $13::bytea[], $14::bytea[])
            WITH ORDINALITY AS u(ai, version, id, type, data, metadata, prev, hash, ord)
        JOIN w ON w.ai = u.ai
        JOIN a ON a.ai = u.ai
    ORDER BY u.ord
    RETURNING stream_id
)
SELECT a.ai, (SELECT count(*) FROM e WHERE e.stream_id = a.stream_id)
FROM w JOIN a ON a.ai = w.ai`

	// appendOneSQL is appendBatchSQL for a batch of one append, its
	// stream's values as scalars rather than arrays: the same lock, the
	// same conditional write of the stream's row before its events, the
	// same result (one row if written), at about a tenth less server time
	// (pgbench, one client, both statements prepared: 2,490 against 2,245
	// tps in one run). A statement that starts alone (see groupcommit.go)
	// runs it: with one client, every append.
	//
	// Parameters: $1 lock key, $2 stream id, $3 expected version (-1: no
	// stream), $4 event count, $5 expected head hash, $6 new head hash;
	// per event $7 versions, $8 ids, $9 types, $10 data, $11 metadata,
	// $12 prev hashes, $13 hashes.
	//
	// Formatted with the schema, a CTE to add (%[2]s: none, or
	// appendOneFence) and what the writes join (%[3]s: l, or l and f).
	appendOneSQL = `WITH l AS (
    SELECT pg_advisory_xact_lock($1::bigint) AS locked
%[2]s), su AS (
    UPDATE %[1]s.streams st SET version = $3::bigint + $4::bigint, head_hash = $6::bytea
    FROM %[3]s
    WHERE $3::bigint >= 0 AND st.stream_id = $2::text AND st.version = $3::bigint
      AND st.head_hash IS NOT DISTINCT FROM $5::bytea
    RETURNING 1
), si AS (
    INSERT INTO %[1]s.streams (stream_id, version, head_hash)
    SELECT $2::text, $4::bigint - 1, $6::bytea FROM %[3]s WHERE $3::bigint < 0
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING 1
), w AS (
    SELECT 1 FROM su UNION ALL SELECT 1 FROM si
), e AS (
    INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata, prev_hash, event_hash)
    SELECT $2::text, u.version, u.id, u.type, u.data, u.metadata, u.prev, u.hash
    FROM unnest($7::bigint[], $8::text[]::uuid[], $9::text[], $10::jsonb[], $11::jsonb[], $12::bytea[], $13::bytea[])
            WITH ORDINALITY AS u(version, id, type, data, metadata, prev, hash, ord), w
    ORDER BY u.ord
    RETURNING 1
)
SELECT 1::bigint, (SELECT count(*) FROM e) FROM w`

	// appendOneFence, put into appendOneSQL (its %[2]s, with its writes
	// joining "l, f"), makes the statement of an append beside a fence (see
	// eventstore.Fence): f holds a row only while stream $14 holds event
	// $16 at version $15, read in the
	// statement's snapshot on the server that writes. A fence that does not
	// hold writes nothing, as a wrong expected version does; the caller
	// tells the two apart afterwards.
	//
	// Parameters: appendOneSQL's, then $14 the fenced stream, $15 the
	// fence's version, $16 its event id.
	appendOneFence = `), f AS (
    SELECT 1 AS held FROM %[1]s.events
    WHERE stream_id = $14::text AND stream_version = $15::bigint AND event_id = $16::text::uuid
`

	// settleSQL reads, in one snapshot, the stream's version and head hash
	// (NULL, NULL: no stream) and where any of the append's event ids ($2)
	// sit in it.
	settleSQL = `SELECT s.version, s.head_hash, e.event_id::text, e.stream_version
FROM (SELECT $1::text AS stream_id) AS k
LEFT JOIN %[1]s.streams s ON s.stream_id = k.stream_id
LEFT JOIN %[1]s.events e ON e.stream_id = k.stream_id AND e.event_id = ANY($2::text[]::uuid[])`

	// fenceSQL reports whether stream $1 holds event $3 at version $2.
	fenceSQL = `SELECT EXISTS (SELECT 1 FROM %[1]s.events
WHERE stream_id = $1::text AND stream_version = $2::bigint AND event_id = $3::text::uuid)`

	eventColumns = `global_position, transaction_id, stream_id, stream_version, event_id::text, event_type, data, metadata, recorded_at, prev_hash, event_hash`

	readStreamSQL = `SELECT ` + eventColumns + `
FROM %[1]s.events
WHERE stream_id = $1::text AND stream_version >= $2::bigint
ORDER BY stream_version
LIMIT $3::bigint`

	// readStreamsSQL is readStreamSQL for several reads at once ($1, $2, $3:
	// each read's stream, first version and limit), each row led by its
	// read's ordinal (1-based).
	readStreamsSQL = `SELECT r.ord, e.*
FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(stream_id, from_version, lim, ord)
CROSS JOIN LATERAL (
    SELECT ` + eventColumns + `
    FROM %[1]s.events ev
    WHERE ev.stream_id = r.stream_id AND ev.stream_version >= r.from_version
    ORDER BY ev.stream_version
    LIMIT r.lim
) e
ORDER BY r.ord, e.stream_version`

	// readAllSQL returns only rows of transactions below the snapshot's
	// xmin: every transaction that could still commit a row ordered before
	// them has ended.
	readAllSQL = `SELECT ` + eventColumns + `
FROM %[1]s.events
WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY transaction_id, global_position
LIMIT $3::bigint`

	headSQL = `SELECT transaction_id, global_position
FROM %[1]s.events
WHERE transaction_id < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY transaction_id DESC, global_position DESC
LIMIT 1`

	loadSnapshotSQL = `SELECT version, event_hash, format, state FROM %[1]s.snapshots WHERE stream_id = $1`
	// saveSnapshotSQL keeps the newer of two snapshots of one format, and
	// the new one over one of another format.
	saveSnapshotSQL = `INSERT INTO %[1]s.snapshots (stream_id, version, event_hash, format, state) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (stream_id) DO UPDATE SET version = EXCLUDED.version, event_hash = EXCLUDED.event_hash,
    format = EXCLUDED.format, state = EXCLUDED.state, saved_at = now()
WHERE snapshots.version < EXCLUDED.version OR snapshots.format <> EXCLUDED.format`

	readHeadsSQL = `SELECT stream_id, version, head_hash
FROM %[1]s.streams
WHERE stream_id > $1::text
ORDER BY stream_id
LIMIT $2::bigint`
)

func newStatements(ident string) statements {
	return statements{
		appendBatch:     fmt.Sprintf(appendBatchSQL, ident),
		appendOne:       fmt.Sprintf(appendOneSQL, ident, "", "l"),
		appendOneFenced: fmt.Sprintf(appendOneSQL, ident, fmt.Sprintf(appendOneFence, ident), "l, f"),
		settle:          fmt.Sprintf(settleSQL, ident),
		fence:           fmt.Sprintf(fenceSQL, ident),
		readStream:      fmt.Sprintf(readStreamSQL, ident),
		readStreams:     fmt.Sprintf(readStreamsSQL, ident),
		readAll:         fmt.Sprintf(readAllSQL, ident),
		head:            fmt.Sprintf(headSQL, ident),
		readHeads:       fmt.Sprintf(readHeadsSQL, ident),
		loadSnapshot:    fmt.Sprintf(loadSnapshotSQL, ident),
		saveSnapshot:    fmt.Sprintf(saveSnapshotSQL, ident),
	}
}
