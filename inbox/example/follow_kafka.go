package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/domain/feed"
	"opledger/inbox"
)

// TopicOperationFeed is the feed's Kafka topic (adapters/transport's
// TopicOperationFeed; a downstream service names it in its own code).
const TopicOperationFeed = "opledger.operation-feed"

// KafkaFollower reads the feed from its Kafka topic in a consumer group:
// messages of one operation share a key, so a partition holds them in
// order. An offset is committed only after its entry's transaction
// committed; a crash between the two delivers the entry again, and the
// inbox answers it Duplicate.
type KafkaFollower struct {
	Brokers []string
	GroupID string // default "refunds-issued"
	MaxWait time.Duration
	Log     *slog.Logger
	// handled, when set, hears what became of each entry, and
	// beforeCommit runs before its offset is committed (tests: a crash
	// there).
	handled      func(feed.Entry, inbox.Result)
	beforeCommit func() error
}

// Run follows the topic until ctx ends. An entry whose handling fails is
// handled again in place (1 s doubling to 30 s) before the partition goes
// on, so that one operation's changes stay in order.
func (f *KafkaFollower) Run(ctx context.Context, c *Consumer) error {
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: f.Brokers, GroupID: cmp.Or(f.GroupID, "refunds-issued"), Topic: TopicOperationFeed,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: cmp.Or(f.MaxWait, 500*time.Millisecond),
		CommitInterval: 0, // commit synchronously, after each entry's transaction
	})
	defer r.Close()
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("kafka: fetch: %w", err)
		}
		var e feed.Entry
		if err := json.Unmarshal(m.Value, &e); err != nil || e.EventID == "" {
			// Not an entry: nothing to handle; committed so that it does not
			// stop the partition (a real service would dead-letter it).
			f.Log.Error("kafka: not a feed entry; skipped", "partition", m.Partition, "offset", m.Offset, "err", err)
		} else if err := f.handle(ctx, c, e); err != nil {
			return err
		}
		if f.beforeCommit != nil {
			if err := f.beforeCommit(); err != nil {
				return err
			}
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			return fmt.Errorf("kafka: commit %d@%d: %w", m.Partition, m.Offset, err)
		}
	}
}

func (f *KafkaFollower) handle(ctx context.Context, c *Consumer, e feed.Entry) error {
	backoff := time.Second
	for {
		res, err := c.Handle(ctx, e, "")
		if err == nil && f.handled != nil {
			f.handled(e, res)
		}
		if err == nil || ctx.Err() != nil {
			return ctx.Err()
		}
		f.Log.Warn("kafka: handling failed; again", "event_id", e.EventID, "err", err, "retry_in", backoff)
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}
