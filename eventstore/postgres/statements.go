package postgres

import "fmt"

// statements holds the store's SQL, addressed to its schema once at
// construction so no call builds SQL.
type statements struct {
	appendExact, appendNoStream string
	settle                      string
	readStream, readAll, head   string
	readHeads                   string
}

// Each append variant first takes a transaction-scoped advisory lock on the
// stream (CTE l), then writes the stream's row (CTE s), and the events
// insert reads s's RETURNING. So the row write is the transaction's first
// write, the events are written only when the condition held, and the
// statement returns no row when it did not.
//
// The lock is what makes xid order follow version order. A transaction gets
// its xid at its first write, and Postgres can assign it before the write
// waits for a competing writer of the same row: an upsert's speculative
// insert, racing to create a stream, takes an xid, waits for the winner, and
// then appends after it with the older xid (the storetest StreamOrder test
// catches this). Taking the lock needs no xid, and s reads from l, so an
// append gets its xid only once every earlier append to the stream has
// committed or aborted. The key is derived from schema and stream in Go
// (streamLockKey); a hash collision only serializes two streams' appends.
//
// The hash chain (package chain) is folded in the same statement: CTE c
// starts from the stream's head (its version and head_hash; for a new
// stream -1 and the genesis value) and links each event's content digest,
// computed in Go, with chain.Link's definition: sha256(tag || prev ||
// int8send(version) || content). The head is read in h from the
// statement's snapshot, which may predate the lock; that is safe because
// the streams update is conditional on the same version, rechecked by
// Postgres on the row's latest version, and versions only grow: when the
// update succeeds, the row is the one h read. An append with expected
// version Any is run by Go as an exact append at the version it finds
// (appendAny), so every statement knows the versions it hashes.
//
// Parameters, common to both:
//
//	$1 stream id, $2 number of events, $3 event ids (uuid[]), $4 types,
//	$5 data (jsonb[]), $6 metadata (jsonb[]), $7 the stream's lock key,
//	$8 content digests (bytea[]), $9 chain.LinkTag, $10 chain.Genesis;
//	appendExact adds $11, the expected version.
//
// The result row is (new stream version, events inserted).
const (
	appendLockCTE = `WITH RECURSIVE l AS (
    SELECT pg_advisory_xact_lock($7::bigint)
), `
	// chainCTE needs a relation h(version, hash): the head to chain from.
	chainCTE = `c(ord, version, prev, hash) AS (
    SELECT 0::bigint, h.version, NULL::bytea, h.hash FROM h
  UNION ALL
    SELECT c.ord + 1, c.version + 1, c.hash,
           sha256($9::bytea || c.hash || int8send(c.version + 1) || ($8::bytea[])[c.ord + 1])
    FROM c WHERE c.ord < $2::bigint
), s AS (
`
	appendEventsCTE = `
), e AS (
    INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata, prev_hash, event_hash)
    SELECT $1::text, s.version - $2::bigint + u.ord, u.id, u.type, u.data, u.metadata, c.prev, c.hash
    FROM s, unnest($3::uuid[], $4::text[], $5::jsonb[], $6::jsonb[]) WITH ORDINALITY AS u(id, type, data, metadata, ord)
        JOIN c ON c.ord = u.ord
    ORDER BY u.ord
    RETURNING 1
)
SELECT s.version, (SELECT count(*) FROM e) FROM s`
)

const (
	appendExactSQL = appendLockCTE + `h AS (
    SELECT st.version, coalesce(st.head_hash, $10::bytea) AS hash
    FROM %[1]s.streams st, l
    WHERE st.stream_id = $1::text AND st.version = $11::bigint
), ` + chainCTE + `    UPDATE %[1]s.streams SET version = version + $2::bigint,
        head_hash = (SELECT c.hash FROM c WHERE c.ord = $2::bigint)
    FROM l
    WHERE stream_id = $1::text AND version = $11::bigint AND EXISTS (SELECT 1 FROM h)
    RETURNING version` + appendEventsCTE

	appendNoStreamSQL = appendLockCTE + `h AS (
    SELECT -1::bigint AS version, $10::bytea AS hash
), ` + chainCTE + `    INSERT INTO %[1]s.streams (stream_id, version, head_hash)
    SELECT $1::text, $2::bigint - 1, (SELECT c.hash FROM c WHERE c.ord = $2::bigint) FROM l
    ON CONFLICT (stream_id) DO NOTHING
    RETURNING version` + appendEventsCTE

	// settleSQL reads, in one snapshot, the stream's version (NULL: no
	// stream) and where any of the append's event ids ($2) sit in it.
	settleSQL = `SELECT s.version, e.event_id::text, e.stream_version
FROM (SELECT $1::text AS stream_id) AS k
LEFT JOIN %[1]s.streams s ON s.stream_id = k.stream_id
LEFT JOIN %[1]s.events e ON e.stream_id = k.stream_id AND e.event_id = ANY($2::uuid[])`

	eventColumns = `global_position, transaction_id, stream_id, stream_version, event_id::text, event_type, data, metadata, recorded_at, prev_hash, event_hash`

	readStreamSQL = `SELECT ` + eventColumns + `
FROM %[1]s.events
WHERE stream_id = $1::text AND stream_version >= $2::bigint
ORDER BY stream_version
LIMIT $3::bigint`

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

	readHeadsSQL = `SELECT stream_id, version, head_hash
FROM %[1]s.streams
WHERE stream_id > $1::text
ORDER BY stream_id
LIMIT $2::bigint`
)

func newStatements(ident string) statements {
	return statements{
		appendExact:    fmt.Sprintf(appendExactSQL, ident),
		appendNoStream: fmt.Sprintf(appendNoStreamSQL, ident),
		settle:         fmt.Sprintf(settleSQL, ident),
		readStream:     fmt.Sprintf(readStreamSQL, ident),
		readAll:        fmt.Sprintf(readAllSQL, ident),
		head:           fmt.Sprintf(headSQL, ident),
		readHeads:      fmt.Sprintf(readHeadsSQL, ident),
	}
}
