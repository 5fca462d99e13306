package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/setaside"
)

// ConsumerConfig configures a Consumer. Zero values take defaults.
type ConsumerConfig struct {
	Brokers  []string // required
	WorkerID string   // required: names this member on dead letters and in logs
	// GroupID is the consumer group (default "opledger-workers").
	GroupID string
	// Topic is consumed (default transport.TopicRefundRequests);
	// DeadLetterTopic receives bad input (default transport.TopicDeadLetters).
	Topic, DeadLetterTopic string
	// Dialer dials the brokers for the group and the partition readers
	// (default kafka-go's DefaultDialer).
	Dialer *kafkago.Dialer
	// DeadLetters writes to DeadLetterTopic (default: a Publisher on
	// Brokers, closed with the Consumer).
	DeadLetters transport.Publisher
	// Group timing, as kafka-go defines them (defaults
	// DefaultHeartbeatInterval, DefaultSessionTimeout,
	// DefaultRebalanceTimeout, 2s): see the constants for what they trade.
	HeartbeatInterval, SessionTimeout, RebalanceTimeout, JoinGroupBackoff time.Duration
	// MaxWait bounds how long a partition reader's fetch waits for data
	// (default 500ms); stopping a reader waits up to this long.
	MaxWait time.Duration
	// MaxBytes bounds one fetch (default 1 MiB); QueueCapacity bounds the
	// messages a partition reader holds ahead of the one in flight (default 16).
	MaxBytes, QueueCapacity int
	// SetAside keeps the failed-attempt count of each message (role
	// setaside.RoleKafka, item "<group>/<topic>/<partition>@<offset>"), so
	// that it survives restarts and rebalances: pgsetaside.New in the
	// transport schema. Required.
	SetAside setaside.Store
	// Policy bounds the attempts at a failing message (a Retry that is not
	// an outage, see transport.IsOutage) and the back-off between them
	// (default DefaultPolicy); its partition waits meanwhile, to keep order.
	Policy setaside.Policy
	// RetryBackoff is the first pause before a message is handled again
	// after an outage (the ledger's store unavailable, uncounted) or a
	// failed dead-letter write, doubled up to MaxRetryBackoff (defaults
	// 100ms, 10s).
	RetryBackoff, MaxRetryBackoff time.Duration
	// MaxRetries bounds the consecutive failed dead-letter writes of one
	// message, and the consecutive fetch errors of one partition, before the
	// partition is given back (default 20). Outages are retried in place for
	// as long as the generation lives (a stop or a rebalance ends them).
	MaxRetries int
	// Clock dates failures and dead letters (default clock.System).
	Clock clock.Clock
	// MaxGroupErrors bounds consecutive failures to join the group before
	// Consume returns the error (default 30).
	MaxGroupErrors int
	// DrainTimeout bounds how long the message in flight may take to finish
	// after a stop or a rebalance (default 45s: the worker's provider
	// timeout plus recording).
	DrainTimeout time.Duration
	// CommitEvery and CommitInterval batch a partition's offset commits: an
	// acknowledged message's offset is committed once CommitEvery messages
	// wait for it (default 64), CommitInterval after the first of them
	// (default 200ms; sooner when the partition has nothing more to read),
	// and before the partition is given back. Every offset committed is
	// still past messages the ledger recorded; what a crash leaves
	// uncommitted is read again, and the inbox absorbs it.
	CommitEvery    int
	CommitInterval time.Duration
	Logger         *slog.Logger
}

func (c *ConsumerConfig) setDefaults() {
	c.GroupID = cmp.Or(c.GroupID, "opledger-workers")
	c.Topic = cmp.Or(c.Topic, transport.TopicRefundRequests)
	c.DeadLetterTopic = cmp.Or(c.DeadLetterTopic, transport.TopicDeadLetters)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, DefaultHeartbeatInterval)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.RebalanceTimeout = cmp.Or(c.RebalanceTimeout, DefaultRebalanceTimeout)
	c.JoinGroupBackoff = cmp.Or(c.JoinGroupBackoff, 2*time.Second)
	c.MaxWait = cmp.Or(c.MaxWait, 500*time.Millisecond)
	c.MaxBytes = cmp.Or(c.MaxBytes, 1<<20)
	c.QueueCapacity = cmp.Or(c.QueueCapacity, 16)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, 100*time.Millisecond)
	c.MaxRetryBackoff = cmp.Or(c.MaxRetryBackoff, 10*time.Second)
	c.MaxRetries = cmp.Or(c.MaxRetries, 20)
	c.MaxGroupErrors = cmp.Or(c.MaxGroupErrors, 30)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 45*time.Second)
	c.CommitEvery = cmp.Or(c.CommitEvery, 64)
	c.CommitInterval = cmp.Or(c.CommitInterval, 200*time.Millisecond)
	c.Policy = cmp.Or(c.Policy, DefaultPolicy).WithDefaults()
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// DefaultPolicy bounds the attempts at a failing message: five, 1s, 2s, 4s
// and 8s apart, so its partition waits at most 15s (plus the attempts
// themselves) before the message is dead-lettered and the partition moves
// on.
var DefaultPolicy = setaside.Policy{MaxAttempts: 5, Backoff: time.Second, MaxBackoff: 30 * time.Second}

// maxItemPrefix bounds group and topic names, so that every message's
// set-aside item ("<group>/<topic>/<partition>@<offset>") fits the store.
const maxItemPrefix = 2*domain.MaxIDLength - 40

func (c *ConsumerConfig) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("Brokers is required"))
	}
	if c.WorkerID == "" {
		errs = append(errs, errors.New("WorkerID is required"))
	}
	if c.SetAside == nil {
		errs = append(errs, errors.New("SetAside is required (the attempt counts survive restarts there)"))
	}
	if len(c.GroupID)+len(c.Topic) > maxItemPrefix {
		errs = append(errs, fmt.Errorf("group and topic names longer than %d bytes together", maxItemPrefix))
	}
	if err := c.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Topic == c.DeadLetterTopic {
		errs = append(errs, fmt.Errorf("dead-letter topic %q is the consumed topic", c.Topic))
	}
	if c.MaxRetries < 1 || c.MaxGroupErrors < 1 || c.QueueCapacity < 1 || c.MaxBytes < 1 || c.CommitEvery < 1 || c.CommitInterval <= 0 {
		errs = append(errs, errors.New("retry bounds, queue capacity, max bytes and the commit batch must be positive"))
	}
	if c.RetryBackoff <= 0 || c.MaxRetryBackoff < c.RetryBackoff || c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("back-offs and the drain timeout must be positive, min <= max"))
	}
	if err := CheckGroupTiming(c.HeartbeatInterval, c.SessionTimeout, c.RebalanceTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka: consumer config: %w", err)
	}
	return nil
}

// Consumer is the Kafka transport.Source: a member of a consumer group.
// Safe to Consume once at a time.
type Consumer struct {
	cfg     ConsumerConfig
	dlq     transport.Publisher
	ownsDLQ *Publisher
	stats   consumerStats
}

// NewConsumer validates cfg. It does no I/O.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Consumer{cfg: cfg, dlq: cfg.DeadLetters}
	if c.dlq == nil {
		p, err := NewPublisher(PublisherConfig{Brokers: cfg.Brokers})
		if err != nil {
			return nil, err
		}
		c.dlq, c.ownsDLQ = p, p
	}
	return c, nil
}

// Close releases the dead-letter writer the Consumer made.
func (c *Consumer) Close() error {
	if c.ownsDLQ != nil {
		return c.ownsDLQ.Close()
	}
	return nil
}

// Consume implements transport.Source: it joins the group and, for every
// generation, runs one goroutine per assigned partition (see package doc for
// the offset rules). It returns ctx.Err() once ctx ended and the partitions
// drained, or an error after MaxGroupErrors consecutive failures to join.
func (c *Consumer) Consume(ctx context.Context, handle transport.HandleFunc) error {
	group, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID: c.cfg.GroupID, Brokers: c.cfg.Brokers, Dialer: c.cfg.Dialer, Topics: []string{c.cfg.Topic},
		HeartbeatInterval: c.cfg.HeartbeatInterval, SessionTimeout: c.cfg.SessionTimeout,
		RebalanceTimeout: c.cfg.RebalanceTimeout, JoinGroupBackoff: c.cfg.JoinGroupBackoff,
		StartOffset: kafkago.FirstOffset,
	})
	if err != nil {
		return fmt.Errorf("kafka: consumer group %s: %w", c.cfg.GroupID, err)
	}
	// Close leaves the group after every partition goroutine returned.
	defer group.Close()
	log := c.cfg.Logger.With("group", c.cfg.GroupID, "worker", c.cfg.WorkerID)
	for failures := 0; ; {
		gen, err := group.Next(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			failures++
			if failures >= c.cfg.MaxGroupErrors {
				return fmt.Errorf("kafka: group %s: %d consecutive failures to join: %w", c.cfg.GroupID, failures, err)
			}
			log.WarnContext(ctx, "joining the group failed; retrying", "err", err, "failures", failures)
			continue // kafka-go backs off JoinGroupBackoff before the next attempt
		}
		failures = 0
		assigned := gen.Assignments[c.cfg.Topic]
		log.InfoContext(ctx, "generation started", "generation", gen.ID, "partitions", len(assigned))
		for _, a := range assigned {
			gen.Start(func(gctx context.Context) { c.partition(ctx, gctx, gen, a, handle) })
		}
	}
}

var _ transport.Source = (*Consumer)(nil)
