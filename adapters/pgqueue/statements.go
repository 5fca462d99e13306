package pgqueue

import (
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SQL, with %[1]s standing for the quoted schema. Every statement is one
// round trip; times come from the database's clock, the one every worker
// shares.
const (
	sqlLoadCheckpoint = `SELECT position FROM %[1]s.relay_checkpoints WHERE name = $1`
	sqlSaveCheckpoint = `INSERT INTO %[1]s.relay_checkpoints (name, position, updated_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, updated_at = EXCLUDED.updated_at`

	// sqlPublish inserts a batch; a message id already in the topic is left
	// as it is (a relay publishing again after a crash).
	sqlPublish = `INSERT INTO %[1]s.messages (topic, message_id, key, value, headers)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[])
ON CONFLICT (topic, message_id) DO NOTHING`

	// sqlClaim takes up to $2 visible ready rows of topic $1 whose key has
	// no earlier ready row (one message per key in flight, in id order),
	// skipping rows other workers hold locked; counts the attempt and hides
	// each row for $3 milliseconds. A row claimed $5 times already is
	// dead-lettered instead (state 'dead' in the result).
	sqlClaim = `WITH candidate AS (
    SELECT m.id FROM %[1]s.messages m
    WHERE m.topic = $1 AND m.state = 'ready' AND m.visible_at <= now()
      AND NOT EXISTS (
          SELECT 1 FROM %[1]s.messages e
          WHERE e.topic = m.topic AND e.key = m.key AND e.state = 'ready' AND e.id < m.id)
    ORDER BY m.id
    LIMIT $2
    FOR UPDATE OF m SKIP LOCKED
)
UPDATE %[1]s.messages m SET
    attempts    = CASE WHEN m.attempts >= $5 THEN m.attempts ELSE m.attempts + 1 END,
    visible_at  = now() + $3::float8 * interval '1 millisecond',
    claimed_by  = $4,
    state       = CASE WHEN m.attempts >= $5 THEN 'dead' ELSE 'ready' END,
    settled_at  = CASE WHEN m.attempts >= $5 THEN now() END,
    dead_reason = CASE WHEN m.attempts >= $5 THEN $6 END,
    dead_detail = CASE WHEN m.attempts >= $5 THEN 'handed out ' || m.attempts || ' times without being settled' END
FROM candidate c WHERE m.id = c.id
RETURNING m.id, m.message_id, m.key, m.value, m.headers, m.attempts, m.state`

	sqlAck = `UPDATE %[1]s.messages SET state = 'acked', settled_at = now(), last_error = NULL
WHERE id = $1 AND attempts = $2 AND state = 'ready'`
	sqlDeadLetter = `UPDATE %[1]s.messages SET state = 'dead', settled_at = now(), dead_reason = $3, dead_detail = $4,
    headers = headers || $5::jsonb
WHERE id = $1 AND attempts = $2 AND state = 'ready'`
	sqlRetry = `UPDATE %[1]s.messages SET visible_at = now() + $3::float8 * interval '1 millisecond', last_error = $4
WHERE id = $1 AND attempts = $2 AND state = 'ready'`

	sqlListTopic = `SELECT id, message_id, key, value, headers, state, attempts, created_at
FROM %[1]s.messages WHERE topic = $1 AND id > $2 ORDER BY id LIMIT $3`

	sqlListDead = `SELECT m.id, m.message_id, m.key, m.value, m.headers, m.dead_reason, m.dead_detail, m.settled_at,
    r.message_id, r.resubmitted_by, r.resubmitted_at, r.published
FROM %[1]s.messages m LEFT JOIN %[1]s.resubmissions r ON r.dead_letter_id = 'DL-' || m.id
WHERE m.topic = $1 AND m.state IN ('dead', 'resubmitted') ORDER BY m.id LIMIT $2`
	sqlDeadIDs       = `SELECT id FROM %[1]s.messages WHERE topic = $1 AND state = 'dead' ORDER BY id LIMIT $2`
	sqlLockDead      = `SELECT message_id, key, value, headers, state FROM %[1]s.messages WHERE id = $1 AND topic = $2 FOR UPDATE`
	sqlMarkResubmit  = `UPDATE %[1]s.messages SET state = 'resubmitted' WHERE id = $1`
	sqlInsertMessage = `INSERT INTO %[1]s.messages (topic, message_id, key, value, headers) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (topic, message_id) DO NOTHING`

	sqlBeginResubmission = `WITH ins AS (
    INSERT INTO %[1]s.resubmissions (dead_letter_id, message_id, resubmitted_by, published)
    VALUES ($1, $2, $3, $4) ON CONFLICT (dead_letter_id) DO NOTHING
    RETURNING dead_letter_id, message_id, resubmitted_by, resubmitted_at, published, true AS fresh)
SELECT * FROM ins
UNION ALL
SELECT dead_letter_id, message_id, resubmitted_by, resubmitted_at, published, false
FROM %[1]s.resubmissions WHERE dead_letter_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`
	sqlDoneResubmission   = `UPDATE %[1]s.resubmissions SET published = true WHERE dead_letter_id = $1`
	sqlLookupResubmission = `SELECT dead_letter_id, message_id, resubmitted_by, resubmitted_at, published
FROM %[1]s.resubmissions WHERE dead_letter_id = ANY($1)`
)

// statements holds the SQL above for one schema.
type statements struct {
	loadCheckpoint, saveCheckpoint                  string
	publish, claim, ack, deadLetter, retry          string
	listTopic, listDead, deadIDs, lockDead          string
	markResubmit, insertMessage                     string
	beginResubmission, doneResubmission, lookupResu string
}

func newStatements(schema string) statements {
	ident := pgx.Identifier{schema}.Sanitize()
	f := func(q string) string { return fmt.Sprintf(q, ident) }
	return statements{
		loadCheckpoint: f(sqlLoadCheckpoint), saveCheckpoint: f(sqlSaveCheckpoint),
		publish: f(sqlPublish), claim: f(sqlClaim), ack: f(sqlAck), deadLetter: f(sqlDeadLetter), retry: f(sqlRetry),
		listTopic: f(sqlListTopic), listDead: f(sqlListDead), deadIDs: f(sqlDeadIDs), lockDead: f(sqlLockDead),
		markResubmit: f(sqlMarkResubmit), insertMessage: f(sqlInsertMessage),
		beginResubmission: f(sqlBeginResubmission), doneResubmission: f(sqlDoneResubmission), lookupResu: f(sqlLookupResubmission),
	}
}
