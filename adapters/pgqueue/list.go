package pgqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Message is one row of the queue, for inspection (tests, `opledger dlq
// signals`).
type Message struct {
	ID        int64
	MessageID string
	Key       string
	Value     []byte
	Headers   map[string]string
	State     string // ready, acked, dead, resubmitted
	Attempts  int
	CreatedAt time.Time
}

// MaxListLimit bounds one ListTopic page.
const MaxListLimit = 10_000

// ListTopic returns up to limit messages of topic with row id > afterID, in
// id order, whatever their state: the security signals on the Postgres-only
// transport are read this way.
func (q *Queue) ListTopic(ctx context.Context, topic string, afterID int64, limit int) ([]Message, error) {
	limit = min(max(limit, 1), MaxListLimit)
	rows, err := q.cfg.DB.Query(ctx, q.sql.listTopic, topic, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", topic, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var (
			m       Message
			headers []byte
		)
		if err := rows.Scan(&m.ID, &m.MessageID, &m.Key, &m.Value, &headers, &m.State, &m.Attempts, &m.CreatedAt); err != nil {
			return nil, fmt.Errorf("list %s: %w", topic, err)
		}
		if err := json.Unmarshal(headers, &m.Headers); err != nil {
			return nil, fmt.Errorf("list %s: row %d headers: %w", topic, m.ID, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", topic, err)
	}
	return out, nil
}
