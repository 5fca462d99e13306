package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"opledger/adapters/transport"
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
	Attempt   int  // this claim's attempt number (1 on first delivery)
	Exhausted bool // claimed MaxAttempts times before: dead-lettered by this claim, not to be handled
}

// Inbound is c as a Source hands it to a HandleFunc.
func (c Claimed) Inbound() transport.Inbound {
	return transport.Inbound{
		Key: []byte(c.Key), Value: c.Value, Headers: c.Headers,
		Origin: transport.Origin{Transport: "postgres", Topic: c.Topic, Offset: c.ID, Attempt: c.Attempt},
	}
}

// Claim hands out up to limit messages of the queue's topic to workerID:
// visible ready rows whose key has no earlier ready row, in id order,
// skipping rows another claimer holds. Each is hidden for the visibility
// timeout and its attempt counted. Rows claimed MaxAttempts times already
// are dead-lettered instead and returned with Exhausted set.
func (q *Queue) Claim(ctx context.Context, workerID string, limit int) ([]Claimed, error) {
	limit = min(max(limit, 1), MaxConcurrency)
	rows, err := q.cfg.DB.Query(ctx, q.sql.claim, q.cfg.Topic, limit, float64(q.cfg.VisibilityTimeout.Milliseconds()),
		workerID, q.cfg.MaxAttempts, string(transport.ReasonDeliveryAttemptsExhausted))
	if err != nil {
		return nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
	}
	defer rows.Close()
	var out []Claimed
	for rows.Next() {
		var (
			c       = Claimed{Topic: q.cfg.Topic}
			headers []byte
			state   string
		)
		if err := rows.Scan(&c.ID, &c.MessageID, &c.Key, &c.Value, &headers, &c.Attempt, &state); err != nil {
			return nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
		}
		if err := json.Unmarshal(headers, &c.Headers); err != nil {
			return nil, fmt.Errorf("claim row %d: headers: %w", c.ID, err)
		}
		c.Exhausted = state == "dead"
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim from %s.messages: %w", q.schema, err)
	}
	return out, nil
}

// Settle does what d says with a claimed message, conditional on the claim
// still holding (else ErrClaimLost): ActionAck marks it acknowledged;
// ActionDeadLetter moves it to the dead-letter queue with the reason and
// detail, in the same row and statement; ActionRetry hides it for the retry
// back-off of its attempt, after which it is handed out again.
func (q *Queue) Settle(ctx context.Context, c Claimed, d transport.Disposition) error {
	var (
		query string
		args  []any
	)
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
		errText := ""
		if d.Err != nil {
			errText = d.Err.Error()
		}
		query, args = q.sql.retry, []any{c.ID, c.Attempt, float64(q.retryBackoff(c.Attempt).Milliseconds()), errText}
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

// retryBackoff is RetryBackoff doubled per earlier attempt, at most
// MaxRetryBackoff.
func (q *Queue) retryBackoff(attempt int) time.Duration {
	b := q.cfg.RetryBackoff
	for i := 1; i < attempt && b < q.cfg.MaxRetryBackoff; i++ {
		b *= 2
	}
	return min(b, q.cfg.MaxRetryBackoff)
}
