package pgqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
)

// MaxConcurrency bounds Config.Concurrency, and so the rows one claim takes.
// A Consume holds at most twice its Concurrency: as many being handled, and
// up to as many claimed ahead (see Consume).
const MaxConcurrency = 64

// DefaultConcurrency is Config.Concurrency's default: a worker mostly waits
// (on the provider, on commits), so it keeps several messages in flight,
// and claims and acknowledgements are shared among them.
const DefaultConcurrency = 32

// Config configures a Queue. Zero values take defaults.
type Config struct {
	DB     DB     // required
	Schema string // default DefaultSchema
	// Topic is the topic Consume claims from and the dead-letter queue
	// lists (default transport.TopicRefundRequests).
	Topic string
	// WorkerID names the claimer in claimed_by and on dead letters; required
	// by Consume.
	WorkerID string
	// Concurrency bounds the messages one Consume handles at once (default
	// DefaultConcurrency, at most MaxConcurrency); it claims up to as many
	// again ahead of its handlers (see Consume).
	Concurrency int
	// VisibilityTimeout hides a claimed message from other claimers (default
	// 2m). It must exceed the longest handling (the worker's provider timeout
	// plus recording), or a live worker's message is handed out again (which
	// is safe, the inbox absorbs it, but wasteful).
	VisibilityTimeout time.Duration
	// MaxAttempts bounds the counted attempts at one message: claimed that
	// often without being settled, or settled as failed (a Retry that is not
	// an outage), it is dead-lettered as delivery.attempts-exhausted
	// (default 10). Outages (transport.IsOutage) are not counted.
	MaxAttempts int
	// RetryBackoff is how long a failed message stays hidden before it is
	// handed out again, doubled per counted attempt up to MaxRetryBackoff
	// (defaults 1s, 5m): with the defaults, the tenth attempt comes about
	// 13 minutes after the first. Meanwhile later messages of its key wait
	// (order per key); other keys flow.
	RetryBackoff, MaxRetryBackoff time.Duration
	// MaxOutageBackoff caps the hiding after an outage, RetryBackoff
	// doubled per consecutive outage of the message (default 30s).
	MaxOutageBackoff time.Duration
	// PollMin and PollMax bound the pause after an empty claim (defaults
	// 10ms, 1s): it starts at PollMin and doubles.
	PollMin, PollMax time.Duration
	// DrainTimeout bounds how long a message in flight may take to finish
	// once Consume's ctx ended (default 45s).
	DrainTimeout time.Duration
	// MaxClaimFailures bounds consecutive failed claims of one claimer
	// before Consume returns the error (default 30).
	MaxClaimFailures int
	Logger           *slog.Logger
}

func (c *Config) setDefaults() {
	c.Topic = cmp.Or(c.Topic, transport.TopicRefundRequests)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.VisibilityTimeout = cmp.Or(c.VisibilityTimeout, 2*time.Minute)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 10)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, time.Second)
	c.MaxRetryBackoff = cmp.Or(c.MaxRetryBackoff, 5*time.Minute)
	c.MaxOutageBackoff = cmp.Or(c.MaxOutageBackoff, 30*time.Second)
	c.PollMin = cmp.Or(c.PollMin, 10*time.Millisecond)
	c.PollMax = cmp.Or(c.PollMax, time.Second)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, 45*time.Second)
	c.MaxClaimFailures = cmp.Or(c.MaxClaimFailures, 30)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.DB == nil {
		errs = append(errs, errors.New("DB is required"))
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		errs = append(errs, fmt.Errorf("concurrency %d must be in [1, %d]", c.Concurrency, MaxConcurrency))
	}
	if c.VisibilityTimeout < time.Second || c.MaxAttempts < 1 || c.MaxClaimFailures < 1 {
		errs = append(errs, errors.New("visibility timeout must be at least 1s; MaxAttempts and MaxClaimFailures positive"))
	}
	if c.RetryBackoff <= 0 || c.MaxRetryBackoff < c.RetryBackoff || c.MaxOutageBackoff <= 0 || c.PollMin <= 0 || c.PollMax < c.PollMin || c.DrainTimeout <= 0 {
		errs = append(errs, errors.New("back-offs must be positive with min <= max"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pgqueue: config: %w", err)
	}
	return nil
}

// Queue is the Postgres-only transport. It implements transport.Publisher,
// transport.Source and transport.DeadLetterQueue, and is safe for
// concurrent use.
type Queue struct {
	cfg       Config
	schema    string
	sql       statements
	published notifier // this Queue published: its Consume loops look again
}

// notifier tells every waiter at once that something happened: wait
// returns a channel that notify closes.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// New validates cfg. It does no I/O; the schema must have been migrated
// (CheckSchema says whether it was).
func New(cfg Config) (*Queue, error) {
	cfg.setDefaults()
	schema, err := pgstate.Schema(cfg.Schema)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Queue{cfg: cfg, schema: schema, sql: newStatements(schema)}, nil
}

// Schema returns the schema the queue's table lives in.
func (q *Queue) Schema() string { return q.schema }

// Publish implements transport.Publisher: one statement inserts the batch,
// and a message id already present in its topic is left as it was (a relay
// publishing again after a crash adds nothing). A Consume of the same Queue
// that found nothing claims again at once rather than finish its pause (a
// worker running the relay); other processes' claimers find the messages at
// their next poll.
func (q *Queue) Publish(ctx context.Context, msgs []transport.Outbound) error {
	if len(msgs) == 0 {
		return nil
	}
	topics := make([]string, len(msgs))
	ids := make([]string, len(msgs))
	keys := make([]string, len(msgs))
	values := make([][]byte, len(msgs))
	headers := make([]string, len(msgs))
	for i, m := range msgs {
		h, err := encodeHeaders(m.Headers)
		if err != nil {
			return fmt.Errorf("publish %s: %w", m.MessageID, err)
		}
		topics[i], ids[i], keys[i], values[i], headers[i] = m.Topic, m.MessageID, m.Key, m.Value, h
	}
	if _, err := q.cfg.DB.Exec(ctx, q.sql.publish, topics, ids, keys, values, headers); err != nil {
		return fmt.Errorf("publish %d messages to %s: %w", len(msgs), q.schema, err)
	}
	q.published.notify()
	return nil
}

func encodeHeaders(h map[string]string) (string, error) {
	if h == nil {
		h = map[string]string{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}

var (
	_ transport.Publisher       = (*Queue)(nil)
	_ transport.Source          = (*Queue)(nil)
	_ transport.DeadLetterQueue = (*Queue)(nil)
)
