package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/transport"
)

// PublisherConfig configures a Publisher. Zero values take defaults.
type PublisherConfig struct {
	Brokers []string // required
	// Transport dials the brokers (default kafka-go's DefaultTransport).
	Transport kafkago.RoundTripper
	// BatchTimeout bounds how long a write waits to fill a batch (default
	// 1ms): the relay hands over whole batches already, so waiting longer
	// only delays every publish (each partition's batch waited it out),
	// dead letters included.
	BatchTimeout time.Duration
	// MaxAttempts bounds the writer's attempts per batch (default 10).
	MaxAttempts int
	// WriteTimeout bounds one write (default 10s).
	WriteTimeout time.Duration
	// AllowAutoTopicCreation lets a write create a missing topic, where the
	// cluster allows it (default false: topics are provisioned).
	AllowAutoTopicCreation bool
}

// Publisher writes transport.Outbound messages to their topics. It
// implements transport.Publisher and is safe for concurrent use. Messages
// are partitioned by a hash of their key, so one operation's messages stay
// in one partition and in order; a write returns only once every message is
// acknowledged by all in-sync replicas.
type Publisher struct {
	w      *kafkago.Writer
	client *kafkago.Client
}

// NewPublisher validates cfg. It does no I/O.
func NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: publisher config: Brokers is required")
	}
	w := &kafkago.Writer{
		Addr:                   kafkago.TCP(cfg.Brokers...),
		Balancer:               kafkago.Murmur2Balancer{}, // the Java clients' default: same key, same partition, whoever publishes
		RequiredAcks:           kafkago.RequireAll,
		BatchTimeout:           cmp.Or(cfg.BatchTimeout, time.Millisecond),
		MaxAttempts:            cmp.Or(cfg.MaxAttempts, 10),
		WriteTimeout:           cmp.Or(cfg.WriteTimeout, 10*time.Second),
		BatchSize:              1000, // messages per produce request; a relay batch is at most 500 events
		AllowAutoTopicCreation: cfg.AllowAutoTopicCreation,
		Transport:              cfg.Transport,
	}
	// Ping goes the writer's way to the brokers (its Transport), bounded by
	// pingTimeout.
	client := &kafkago.Client{Addr: w.Addr, Transport: cfg.Transport, Timeout: min(w.WriteTimeout, pingTimeout)}
	return &Publisher{w: w, client: client}, nil
}

// pingTimeout bounds one Ping.
const pingTimeout = 5 * time.Second

// Ping implements transport.Pinger: one metadata request to the brokers,
// through the writer's transport. An idle relay calls it, so that its
// status says the brokers cannot be reached before there is anything to
// publish.
func (p *Publisher) Ping(ctx context.Context) error {
	if _, err := p.client.Metadata(ctx, &kafkago.MetadataRequest{}); err != nil {
		return fmt.Errorf("kafka brokers unreachable: %w", err)
	}
	return nil
}

// Publish implements transport.Publisher. Each message carries its Headers
// (sorted by name) and, if they lack it, its MessageID as HeaderMessageID.
func (p *Publisher) Publish(ctx context.Context, msgs []transport.Outbound) error {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]kafkago.Message, len(msgs))
	for i, m := range msgs {
		if m.Topic == "" {
			return fmt.Errorf("publish %s: no topic", m.MessageID)
		}
		out[i] = kafkago.Message{Topic: m.Topic, Key: []byte(m.Key), Value: m.Value, Headers: headers(m)}
	}
	if err := p.w.WriteMessages(ctx, out...); err != nil {
		return fmt.Errorf("publish %d messages: %w", len(msgs), err)
	}
	return nil
}

func headers(m transport.Outbound) []kafkago.Header {
	names := make([]string, 0, len(m.Headers)+1)
	for k := range m.Headers {
		names = append(names, k)
	}
	if _, ok := m.Headers[transport.HeaderMessageID]; !ok && m.MessageID != "" {
		names = append(names, transport.HeaderMessageID)
	}
	slices.Sort(names)
	out := make([]kafkago.Header, len(names))
	for i, k := range names {
		v, ok := m.Headers[k]
		if !ok {
			v = m.MessageID
		}
		out[i] = kafkago.Header{Key: k, Value: []byte(v)}
	}
	return out
}

// headerMap reads a message's headers (the last value of a repeated name).
func headerMap(hs []kafkago.Header) map[string]string {
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[h.Key] = string(h.Value)
	}
	return out
}

// Close flushes and closes the writer.
func (p *Publisher) Close() error {
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("close kafka publisher: %w", err)
	}
	return nil
}

var (
	_ transport.Publisher = (*Publisher)(nil)
	_ transport.Pinger    = (*Publisher)(nil)
)
