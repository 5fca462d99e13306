package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// TopicDepth is how many messages of one topic wait, for /metrics.
type TopicDepth struct {
	Topic string
	// Ready counts visible messages (a claimer takes one as soon as the
	// message before it on its key is settled); Hidden counts messages not
	// visible yet: in flight (claimed) or backing off after a failure or an
	// outage.
	Ready, Hidden int64
	// Dead counts dead letters not resubmitted: the queue's set-aside
	// messages, listed by `opledger dlq list`.
	Dead int64
}

// Depth returns, per topic with any ready message or dead letter, how many
// there are, in topic order. Two statements, each over a partial index
// (ready rows; dead rows), so its cost follows what waits, not the
// acknowledged history. Safe for concurrent use; serve's /metrics calls it.
func (q *Queue) Depth(ctx context.Context) ([]TopicDepth, error) {
	by := map[string]*TopicDepth{}
	get := func(topic string) *TopicDepth {
		if by[topic] == nil {
			by[topic] = &TopicDepth{Topic: topic}
		}
		return by[topic]
	}
	rows, err := q.cfg.DB.Query(ctx, q.sql.depthReady)
	if err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	for rows.Next() {
		var (
			topic         string
			ready, hidden int64
		)
		if err := rows.Scan(&topic, &ready, &hidden); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue depth: %w", err)
		}
		d := get(topic)
		d.Ready, d.Hidden = ready, hidden
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue depth: %w", err)
	}
	rows, err = q.cfg.DB.Query(ctx, q.sql.depthDead)
	if err != nil {
		return nil, fmt.Errorf("queue dead letters: %w", err)
	}
	for rows.Next() {
		var (
			topic string
			dead  int64
		)
		if err := rows.Scan(&topic, &dead); err != nil {
			rows.Close()
			return nil, fmt.Errorf("queue dead letters: %w", err)
		}
		get(topic).Dead = dead
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("queue dead letters: %w", err)
	}
	out := make([]TopicDepth, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b TopicDepth) int { return cmp.Compare(a.Topic, b.Topic) })
	return out, nil
}
