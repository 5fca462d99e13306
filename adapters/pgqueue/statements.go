package pgqueue

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SQL, with %[1]s standing for the quoted schema. Every statement is one
// round trip; times come from the database's clock, the one every worker
// shares.
const (
	// sqlPublish inserts a batch; a message id already in the topic is left
	// as it is (a relay publishing again after a crash).
	sqlPublish = `INSERT INTO %[1]s.messages (topic, message_id, key, value, headers)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[])
ON CONFLICT (topic, message_id) DO NOTHING`

	// sqlClaim takes up to $2 visible ready rows of topic $1 whose key has
	// no earlier ready row (one message per key in flight, in id order),
	// skipping rows other workers hold locked; counts the attempt and hides
	// each row for $3 milliseconds. A row whose counted attempts (attempts
	// minus the uncounted outages) reached $5 is dead-lettered instead
	// (state 'dead' in the result), with its reason ($6), the attempts and
	// the last error in its columns and headers.
	sqlClaim = `WITH ` + claimCandidate + `, ` + claimJudged + `
` + claimUpdate

	claimCandidate = `candidate AS (
    SELECT m.id FROM %[1]s.messages m
    WHERE m.topic = $1 AND m.state = 'ready' AND m.visible_at <= now()
      AND m.id = (
          SELECT min(e.id) FROM %[1]s.messages e
          WHERE e.topic = m.topic AND e.key = m.key AND e.state = 'ready')
    ORDER BY m.id
    LIMIT $2
    FOR UPDATE OF m SKIP LOCKED
)`
	claimJudged = `judged AS (
    SELECT m.id, m.attempts - m.uncounted >= $5 AS exhausted,
           'handed out ' || (m.attempts - m.uncounted) || ' times without success'
               || COALESCE('; last error: ' || m.last_error, '') AS detail
    FROM %[1]s.messages m JOIN candidate c ON c.id = m.id
)`
	claimUpdate = `UPDATE %[1]s.messages m SET
    attempts    = CASE WHEN j.exhausted THEN m.attempts ELSE m.attempts + 1 END,
    visible_at  = now() + $3::float8 * interval '1 millisecond',
    claimed_by  = $4,
    state       = CASE WHEN j.exhausted THEN 'dead' ELSE 'ready' END,
    settled_at  = CASE WHEN j.exhausted THEN now() END,
    dead_reason = CASE WHEN j.exhausted THEN $6 END,
    dead_detail = CASE WHEN j.exhausted THEN j.detail END,
    headers     = CASE WHEN j.exhausted THEN m.headers || jsonb_build_object(
                      'opledger-dlq-reason', $6::text, 'opledger-dlq-detail', j.detail,
                      'opledger-dlq-attempts', (m.attempts - m.uncounted)::text, 'opledger-dlq-worker', $4::text)
                  ELSE m.headers END
FROM judged j WHERE m.id = j.id
RETURNING m.id, m.message_id, m.key, m.value, m.headers, m.attempts, m.uncounted, m.state`

	// sqlAck acknowledges row $1 under its claim's attempt ($2). An
	// acknowledgement is idempotent under its claim: a row already
	// acknowledged under the same attempt (an acknowledgement whose answer
	// was lost, run again) is acknowledged, its settled_at kept.
	sqlAck = `UPDATE %[1]s.messages SET state = 'acked', settled_at = CASE WHEN state = 'acked' THEN settled_at ELSE now() END,
    last_error = NULL
WHERE id = $1 AND attempts = $2 AND state IN ('ready', 'acked')`
	// sqlAckBatch acknowledges rows ($1) each under its claim's attempt
	// ($2), as sqlAck does, and returns the ids acknowledged.
	sqlAckBatch = `UPDATE %[1]s.messages m SET state = 'acked', settled_at = CASE WHEN m.state = 'acked' THEN m.settled_at ELSE now() END,
    last_error = NULL
FROM unnest($1::bigint[], $2::int[]) AS a(id, attempts)
WHERE m.id = a.id AND m.attempts = a.attempts AND m.state IN ('ready', 'acked')
RETURNING m.id`
	// sqlRelease gives back rows ($1) claimed ahead and never handled, each
	// under its claim's attempt ($2): visible at once, the claim uncounted.
	sqlRelease = `UPDATE %[1]s.messages m SET uncounted = m.uncounted + 1, visible_at = now()
FROM unnest($1::bigint[], $2::int[]) AS a(id, attempts)
WHERE m.id = a.id AND m.attempts = a.attempts AND m.state = 'ready'`
	// sqlReclaim gives back the rows of topic $1 claimed by $2 hidden until
	// between $4 and $5 milliseconds from now (claimed in the last moments
	// for the visibility timeout, not settled into a retry's back-off) that
	// are not among $3 (the claimer's messages in flight): a claim whose
	// answer was lost. Visible at once, the claim uncounted.
	sqlReclaim = `UPDATE %[1]s.messages m SET uncounted = m.uncounted + 1, visible_at = now()
WHERE m.topic = $1 AND m.claimed_by = $2 AND m.state = 'ready' AND m.id <> ALL($3::bigint[])
  AND m.visible_at > now() + $4::float8 * interval '1 millisecond'
  AND m.visible_at <= now() + $5::float8 * interval '1 millisecond'`
	// sqlGiveBack makes visible at once the rows of topic $1 that claimer
	// $2 holds hidden for a claim (a settle into a back-off clears
	// claimed_by): a Consume that starts holds none, so they are an
	// earlier process's under the same worker id, which died with them
	// (SIGKILL, a crash). The claims stay counted: a message that crashes
	// its worker is dead-lettered after MaxAttempts of them.
	sqlGiveBack = `UPDATE %[1]s.messages SET visible_at = now()
WHERE topic = $1 AND claimed_by = $2 AND state = 'ready' AND visible_at > now()`
	sqlDeadLetter = `UPDATE %[1]s.messages SET state = 'dead', settled_at = now(), dead_reason = $3, dead_detail = $4,
    headers = headers || $5::jsonb
WHERE id = $1 AND attempts = $2 AND state = 'ready'`
	// sqlRetry settles a failed attempt (the message's fault): hidden for
	// $3 milliseconds, no longer claimed, or dead-lettered at once when its
	// counted attempts reached $5 (reason $6, worker $7). It returns the
	// new state.
	sqlRetry = `UPDATE %[1]s.messages SET
    visible_at  = now() + $3::float8 * interval '1 millisecond',
    claimed_by  = CASE WHEN attempts - uncounted >= $5 THEN claimed_by END,
    last_error  = $4,
    state       = CASE WHEN attempts - uncounted >= $5 THEN 'dead' ELSE 'ready' END,
    settled_at  = CASE WHEN attempts - uncounted >= $5 THEN now() END,
    dead_reason = CASE WHEN attempts - uncounted >= $5 THEN $6 END,
    dead_detail = CASE WHEN attempts - uncounted >= $5 THEN 'failed ' || (attempts - uncounted) || ' times; last error: ' || $4 END,
    headers     = CASE WHEN attempts - uncounted >= $5 THEN headers || jsonb_build_object(
                      'opledger-dlq-reason', $6::text, 'opledger-dlq-detail', 'failed ' || (attempts - uncounted) || ' times; last error: ' || $4,
                      'opledger-dlq-attempts', (attempts - uncounted)::text, 'opledger-dlq-worker', $7::text)
                  ELSE headers END
WHERE id = $1 AND attempts = $2 AND state = 'ready'
RETURNING state`
	// sqlOutage settles an attempt that failed for an outage (not the
	// message's fault): uncounted, hidden for $3 milliseconds, no longer
	// claimed.
	sqlOutage = `UPDATE %[1]s.messages SET uncounted = uncounted + 1,
    visible_at = now() + $3::float8 * interval '1 millisecond', last_error = $4, claimed_by = NULL
WHERE id = $1 AND attempts = $2 AND state = 'ready'`

	// sqlDepthReady and sqlDepthDead count, per topic, the ready messages
	// (visible, and hidden: in flight or backing off) and the dead letters
	// not resubmitted; each runs on its partial index.
	sqlDepthReady = `SELECT topic, count(*) FILTER (WHERE visible_at <= now()), count(*) FILTER (WHERE visible_at > now())
FROM %[1]s.messages WHERE state = 'ready' GROUP BY topic`
	sqlDepthDead = `SELECT topic, count(*) FROM %[1]s.messages WHERE state = 'dead' GROUP BY topic`

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

var (
	// sqlClaimAcking is sqlClaim acknowledging, in the same statement, rows
	// $7 each under its claim's attempt ($8) by sqlAckBatch: one
	// commit for both. The claim skips those rows (a row updated twice by
	// one statement keeps one of the two updates, unpredictably), and its
	// snapshot is the statement's, taken before the acknowledgements: a
	// key whose message is acknowledged here still has a ready row in it,
	// so the key's next message is handed out by the next claim, not this
	// one. It returns the claimed rows (state 'ready' or 'dead') and one
	// row per acknowledged id (state 'acked', the other columns empty).
	sqlClaimAcking = `WITH acked AS (
` + strings.NewReplacer("$1::", "$7::", "$2::", "$8::").Replace(sqlAckBatch) + `
), ` + claimCandidateSkipping + `, ` + claimJudged + `, claimed AS (
` + claimUpdate + `
)
SELECT * FROM claimed
UNION ALL
SELECT id, '', '', ''::bytea, '{}'::jsonb, 0, 0, 'acked' FROM acked`

	// claimCandidateSkipping is claimCandidate skipping the rows $7 (those
	// the statement acknowledges).
	claimCandidateSkipping = strings.Replace(claimCandidate, "m.visible_at <= now()", "m.visible_at <= now() AND m.id <> ALL($7::bigint[])", 1)
)

// statements holds the SQL above for one schema.
type statements struct {
	publish, claim, claimAcking, ack, deadLetter    string
	retry, outage                                   string
	ackBatch, release, reclaim, giveBack            string
	depthReady, depthDead                           string
	listTopic, listDead, deadIDs, lockDead          string
	markResubmit, insertMessage                     string
	beginResubmission, doneResubmission, lookupResu string
}

func newStatements(schema string) statements {
	ident := pgx.Identifier{schema}.Sanitize()
	f := func(q string) string { return fmt.Sprintf(q, ident) }
	return statements{
		publish: f(sqlPublish), claim: f(sqlClaim), claimAcking: f(sqlClaimAcking), ack: f(sqlAck), ackBatch: f(sqlAckBatch), release: f(sqlRelease), reclaim: f(sqlReclaim), giveBack: f(sqlGiveBack), deadLetter: f(sqlDeadLetter), retry: f(sqlRetry), outage: f(sqlOutage),
		depthReady: f(sqlDepthReady), depthDead: f(sqlDepthDead),
		listTopic: f(sqlListTopic), listDead: f(sqlListDead), deadIDs: f(sqlDeadIDs), lockDead: f(sqlLockDead),
		markResubmit: f(sqlMarkResubmit), insertMessage: f(sqlInsertMessage),
		beginResubmission: f(sqlBeginResubmission), doneResubmission: f(sqlDoneResubmission), lookupResu: f(sqlLookupResubmission),
	}
}
