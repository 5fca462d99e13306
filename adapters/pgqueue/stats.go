package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// DefaultStatsCap bounds how many rows one Stats call counts per state:
// a scrape must stay cheap even when a consumer is down for days. Above it
// a topic's count stops growing and TopicStats.Capped says so.
const DefaultStatsCap = 100_000

// TopicStats is one topic of the queue.
type TopicStats struct {
	Topic string
	// Ready counts messages not yet settled (waiting, or held by a worker).
	Ready int64
	// Dead counts dead letters not yet resubmitted.
	Dead int64
	// Capped: a count reached the cap; the true number is larger.
	Capped bool
}

// Each statement counts at most $1 rows of its state through the partial
// index that state has (messages_ready, messages_dead), so the acked rows
// that make up most of the table are never read.
const (
	sqlStatsReady = `SELECT topic, count(*) FROM (SELECT topic FROM %[1]s.messages WHERE state = 'ready' LIMIT $1) r GROUP BY topic`
	sqlStatsDead  = `SELECT topic, count(*) FROM (SELECT topic FROM %[1]s.messages WHERE state = 'dead' LIMIT $1) d GROUP BY topic`
)

// Stats counts the queue's unsettled messages and dead letters by topic, at
// most limit rows per state (0: DefaultStatsCap), in topic order. It only
// reads.
func Stats(ctx context.Context, db Querier, schema string, limit int) ([]TopicStats, error) {
	schema, err := schemaName(schema)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, errors.New("pgqueue: nil database")
	}
	limit = cmp.Or(limit, DefaultStatsCap)
	if limit < 1 {
		return nil, fmt.Errorf("pgqueue: stats limit %d must be positive", limit)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	byTopic := map[string]*TopicStats{}
	var total [2]int64
	for i, q := range []string{sqlStatsReady, sqlStatsDead} {
		rows, err := db.Query(ctx, fmt.Sprintf(q, ident), limit)
		if err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
		var (
			topic string
			n     int64
		)
		_, err = pgx.ForEachRow(rows, []any{&topic, &n}, func() error {
			st := byTopic[topic]
			if st == nil {
				st = &TopicStats{Topic: topic}
				byTopic[topic] = st
			}
			if i == 0 {
				st.Ready = n
			} else {
				st.Dead = n
			}
			total[i] += n
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("queue stats: %w", err)
		}
	}
	out := make([]TopicStats, 0, len(byTopic))
	for _, st := range byTopic {
		st.Capped = total[0] >= int64(limit) || total[1] >= int64(limit)
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b TopicStats) int { return cmp.Compare(a.Topic, b.Topic) })
	return out, nil
}
