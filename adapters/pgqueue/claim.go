package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/transport"
	"opledger/domain"
)

// ErrClaimLost means a settle found the row no longer under the caller's
// claim: its visibility timeout passed and another claimer took it (or an
// operator settled it). The other claimer's handling stands; the ledger
// absorbed whichever copy came second.
var ErrClaimLost = errors.New("pgqueue: claim lost")

// Claimed is one message handed out by Claim.
type Claimed struct {
	ID        int64 // the row id; dead letter "DL-<ID>"
	Topic     string
	MessageID string
	Key       string
	Value     []byte
	Headers   map[string]string
	Attempt   int // this claim's attempt number (1 on first delivery); it fences the settle
	// Uncounted is how many earlier claims ended in an outage (not counted
	// against the message): its counted attempt is Attempt - Uncounted.
	Uncounted int
	Exhausted bool // counted MaxAttempts attempts before: dead-lettered by this claim, not to be handled
	// hiddenUntil is when the claim's visibility timeout ends at the
	// latest, by this process's clock (the claim was sent before it
	// started): the row is handed out again after it.
	hiddenUntil time.Time
}

// Counted is this claim's attempt as counted against the message.
func (c Claimed) Counted() int { return c.Attempt - c.Uncounted }

// Inbound is c as a Source hands it to a HandleFunc.
func (c Claimed) Inbound() transport.Inbound {
	return transport.Inbound{
		Key: []byte(c.Key), Value: c.Value, Headers: c.Headers,
		Origin: transport.Origin{Transport: "postgres", Topic: c.Topic, Offset: c.ID, Attempt: c.Attempt},
	}
}

// Claim hands out up to limit messages of the queue's topic to workerID:
// visible ready rows whose key has no earlier ready row, in id order,
// skipping rows another claimer holds. So a batch holds at most one message
// per key, the oldest ready one, and a key's next message is handed out
// only once the one before it is settled (acknowledged or dead-lettered).
// Each is hidden for the visibility timeout and its attempt counted. Rows
// whose counted attempts reached MaxAttempts (claimed and never settled, or
// settled as failed) are dead-lettered instead
// (delivery.attempts-exhausted) and returned with Exhausted set.
func (q *Queue) Claim(ctx context.Context, workerID string, limit int) ([]Claimed, error) {
	out, _, err := q.claim(ctx, workerID, limit, nil)
	return out, err
}

// claim is Claim acknowledging acks in the same statement (sqlClaimAcking;
// none: sqlClaim), each under its claim's attempt as the acker does. It
// returns the claimed messages and the ids of the acks acknowledged (an
// ack missing from them lost its claim). On an error nothing was
// acknowledged or claimed, or the answer was lost with both.
func (q *Queue) claim(ctx context.Context, workerID string, limit int, acks []*pendingAck) ([]Claimed, []int64, error) {
	hiddenUntil := time.Now().Add(q.cfg.VisibilityTimeout)
	query, args := q.claimStatement(workerID, limit, acks)
	rows, err := q.cfg.DB.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
	}
	defer rows.Close()
	var (
		out   []Claimed
		acked []int64
	)
	for rows.Next() {
		var (
			c       = Claimed{Topic: q.cfg.Topic, hiddenUntil: hiddenUntil}
			headers []byte
			state   string
		)
		if err := rows.Scan(&c.ID, &c.MessageID, &c.Key, &c.Value, &headers, &c.Attempt, &c.Uncounted, &state); err != nil {
			return nil, nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
		}
		if state == "acked" {
			acked = append(acked, c.ID)
			continue
		}
		if err := json.Unmarshal(headers, &c.Headers); err != nil {
			return nil, nil, fmt.Errorf("claim row %d: headers: %w", c.ID, err)
		}
		c.Exhausted = state == "dead"
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
	}
	return out, acked, nil
}

// claimStatement is claim's statement and its arguments.
func (q *Queue) claimStatement(workerID string, limit int, acks []*pendingAck) (string, []any) {
	limit = min(max(limit, 1), MaxConcurrency)
	args := []any{q.cfg.Topic, limit, float64(q.cfg.VisibilityTimeout.Milliseconds()),
		workerID, q.cfg.MaxAttempts, string(transport.ReasonDeliveryAttemptsExhausted)}
	if len(acks) == 0 {
		return q.sql.claim, args
	}
	ids, attempts := ackColumns(acks)
	return q.sql.claimAcking, append(args, ids, attempts)
}

// maxErrorText bounds the error text kept with a retried message.
const maxErrorText = 1024

// Settle does what d says with a claimed message, conditional on the claim
// still holding (else ErrClaimLost): ActionAck marks it acknowledged;
// ActionDeadLetter moves it to the dead-letter queue with the reason and
// detail, in the same row and statement; ActionRetry, for an outage
// (transport.IsOutage on ctx, the context the message was handled on), hides
// it for the outage back-off without counting the attempt, and otherwise
// counts it as failed: hidden for the retry back-off of its counted attempt
// (RetryBackoff doubling to MaxRetryBackoff), or dead-lettered
// (delivery.attempts-exhausted) when that was its MaxAttempts-th.
func (q *Queue) Settle(ctx context.Context, c Claimed, d transport.Disposition) error {
	return q.settle(ctx, c, d, transport.IsOutage(ctx, d))
}

// settle is Settle with the Retry's kind decided: outage says whether it
// met an outage (transport.IsOutage on the handling's context).
func (q *Queue) settle(ctx context.Context, c Claimed, d transport.Disposition, outage bool) error {
	var (
		query string
		args  []any
	)
	errText := ""
	if d.Err != nil {
		errText, _ = domain.EvidenceText(d.Err.Error(), maxErrorText)
	}
	switch d.Action {
	case transport.ActionAck:
		query, args = q.sql.ack, []any{c.ID, c.Attempt}
	case transport.ActionDeadLetter:
		h, err := encodeHeaders(map[string]string{
			transport.HeaderDeadReason: string(d.Reason), transport.HeaderDeadDetail: d.Detail,
			transport.HeaderDeadLetteredBy: q.cfg.WorkerID,
		})
		if err != nil {
			return err
		}
		query, args = q.sql.deadLetter, []any{c.ID, c.Attempt, string(d.Reason), d.Detail, h}
	case transport.ActionRetry:
		if outage {
			query, args = q.sql.outage, []any{c.ID, c.Attempt, float64(q.outageBackoff(c.Uncounted + 1).Milliseconds()), errText}
			break
		}
		var state string
		err := q.cfg.DB.QueryRow(ctx, q.sql.retry, c.ID, c.Attempt, float64(q.retryBackoff(c.Counted()).Milliseconds()), errText,
			q.cfg.MaxAttempts, string(transport.ReasonDeliveryAttemptsExhausted), q.cfg.WorkerID).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("settle row %d (%s) attempt %d: %w", c.ID, d.Action, c.Attempt, ErrClaimLost)
		}
		if err != nil {
			return fmt.Errorf("settle row %d (%s): %w", c.ID, d.Action, err)
		}
		if state == "dead" {
			q.cfg.Logger.WarnContext(ctx, "dead-lettered: attempts exhausted", "row", c.ID, "message_id", c.MessageID,
				"attempts", c.Counted(), "err", errText)
		}
		return nil
	default:
		return fmt.Errorf("settle row %d: unknown action %v", c.ID, d.Action)
	}
	tag, err := q.cfg.DB.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("settle row %d (%s): %w", c.ID, d.Action, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("settle row %d (%s) attempt %d: %w", c.ID, d.Action, c.Attempt, ErrClaimLost)
	}
	return nil
}

// retryBackoff is RetryBackoff doubled per earlier counted attempt, at most
// MaxRetryBackoff.
func (q *Queue) retryBackoff(attempt int) time.Duration {
	return doubled(q.cfg.RetryBackoff, attempt, q.cfg.MaxRetryBackoff)
}

// outageBackoff is RetryBackoff doubled per earlier outage of the message,
// at most MaxOutageBackoff: short, so the message goes again soon after
// the store is back.
func (q *Queue) outageBackoff(outages int) time.Duration {
	return doubled(q.cfg.RetryBackoff, outages, q.cfg.MaxOutageBackoff)
}

func doubled(first time.Duration, n int, most time.Duration) time.Duration {
	b := first
	for i := 1; i < n && b < most; i++ { // bounded by most's doublings
		b *= 2
	}
	return min(b, most)
}
