package transport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"opledger/eventstore"
)

// Names of the relays opledger runs, which are also their checkpoints'
// names. Never rename one: a renamed relay starts from the beginning of the
// log (harmless, since message ids are stable, but slow).
const (
	RelayRefundRequests  = "refund-requests"  // SelectRefundRequests
	RelaySecuritySignals = "security-signals" // SelectSecuritySignals
)

// Outbound is one message a Relay publishes.
type Outbound struct {
	Topic     string
	Key       string // the ordering key: the operation id
	MessageID string // stable per source event
	Value     []byte
	Headers   map[string]string
}

// Publisher hands messages to a transport.
//
// Publish returns nil only when every message is durably accepted (Kafka:
// acknowledged by the in-sync replicas; Postgres: committed). On an error
// some may have been accepted. Publishing the same message ids again must be
// harmless to the transport: the consumer side absorbs copies by message id.
// Implementations are safe for concurrent use.
type Publisher interface {
	Publish(ctx context.Context, msgs []Outbound) error
}

// Checkpoints persists where each relay stands in the log, as the text of a
// position (eventstore.Position.String). Load returns "" for a relay that
// never saved one (the start of the log).
type Checkpoints interface {
	Load(ctx context.Context, name string) (string, error)
	Save(ctx context.Context, name, position string) error
}

// Selector maps one log event to the messages to publish for it (none for
// most events). An error is a corrupt event: the relay stops there rather
// than skip it.
type Selector func(rec eventstore.RecordedEvent) ([]Outbound, error)

// RelayConfig configures a Relay. Zero values take defaults.
type RelayConfig struct {
	Name        string // required: the checkpoint's name, e.g. "refund-requests"
	Store       eventstore.Store
	Checkpoints Checkpoints
	Publisher   Publisher
	Select      Selector
	Logger      *slog.Logger
	// BatchSize bounds the events read at once, and so the messages
	// published before one checkpoint (default 500).
	BatchSize int
	// PollMin and PollMax bound the pause between empty reads of the log
	// (defaults 10ms, 1s).
	PollMin, PollMax time.Duration
	// Wake, when set, cuts a pause short (a coalesced notifier).
	Wake <-chan struct{}
	// FailureBackoff is the first pause after a failed round (read, publish
	// or checkpoint), doubled per consecutive failure up to 30 times it
	// (default 100ms).
	FailureBackoff time.Duration
	// MaxFailures bounds consecutive failed rounds: Run then returns the
	// last error (default 60, a few minutes of back-off). A round that
	// checkpoints resets the count.
	MaxFailures int
}

// Relay follows the global log from its checkpoint and publishes what Select
// maps each event to. Per batch: publish everything, then save the
// checkpoint. A crash between the two publishes the batch again on restart;
// message ids derived from the events make the copies recognisable.
type Relay struct {
	cfg       RelayConfig
	published atomic.Int64
}

// NewRelay validates cfg.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Name == "" || cfg.Store == nil || cfg.Checkpoints == nil || cfg.Publisher == nil || cfg.Select == nil {
		return nil, errors.New("transport: relay config: Name, Store, Checkpoints, Publisher and Select are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	cfg.PollMin = cmp.Or(cfg.PollMin, 10*time.Millisecond)
	cfg.PollMax = cmp.Or(cfg.PollMax, time.Second)
	cfg.FailureBackoff = cmp.Or(cfg.FailureBackoff, 100*time.Millisecond)
	cfg.MaxFailures = cmp.Or(cfg.MaxFailures, 60)
	if cfg.BatchSize < 1 || cfg.BatchSize > eventstore.MaxAppendBatch*10 || cfg.MaxFailures < 1 {
		return nil, fmt.Errorf("transport: relay config: batch size %d must be in [1, %d] and MaxFailures positive", cfg.BatchSize, eventstore.MaxAppendBatch*10)
	}
	return &Relay{cfg: cfg}, nil
}

// Published counts messages this relay published (copies after a failed
// checkpoint included).
func (r *Relay) Published() int64 { return r.published.Load() }

// Run relays until ctx ends (it returns ctx.Err()) or MaxFailures
// consecutive rounds failed (it returns the last error). Each round loads
// the checkpoint and follows the log from it.
func (r *Relay) Run(ctx context.Context) error {
	log := r.cfg.Logger.With("relay", r.cfg.Name)
	backoff := r.cfg.FailureBackoff
	for failures := 0; ; {
		progressed, err := r.round(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if progressed {
			failures, backoff = 0, r.cfg.FailureBackoff
		}
		failures++
		if failures >= r.cfg.MaxFailures {
			return fmt.Errorf("relay %s: %d consecutive failed rounds: %w", r.cfg.Name, failures, err)
		}
		log.WarnContext(ctx, "relay round failed; resuming from the checkpoint", "err", err, "failures", failures, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, 30*r.cfg.FailureBackoff)
	}
}

// round follows the log from the saved checkpoint until something fails.
// progressed reports whether it saved at least one checkpoint.
func (r *Relay) round(ctx context.Context) (progressed bool, err error) {
	text, err := r.cfg.Checkpoints.Load(ctx, r.cfg.Name)
	if err != nil {
		return false, fmt.Errorf("load checkpoint: %w", err)
	}
	var after eventstore.Position
	if text != "" {
		if after, err = r.cfg.Store.ParsePosition(text); err != nil {
			return false, fmt.Errorf("checkpoint %s: %w", r.cfg.Name, err)
		}
	}
	opts := eventstore.SubscribeOptions{
		BatchSize: r.cfg.BatchSize, MinBackoff: r.cfg.PollMin, MaxBackoff: r.cfg.PollMax, Wake: r.cfg.Wake,
		MaxUnavailable: 3, // let a store outage surface here, where failures are counted
	}
	err = eventstore.Subscribe(ctx, r.cfg.Store, after, opts, func(ctx context.Context, batch []eventstore.RecordedEvent) error {
		var out []Outbound
		for _, rec := range batch {
			msgs, err := r.cfg.Select(rec)
			if err != nil {
				return fmt.Errorf("select %s@%d (%s): %w", rec.StreamID, rec.Version, rec.Position, err)
			}
			out = append(out, msgs...)
		}
		if len(out) > 0 {
			if err := r.cfg.Publisher.Publish(ctx, out); err != nil {
				return fmt.Errorf("publish %d messages: %w", len(out), err)
			}
			r.published.Add(int64(len(out)))
		}
		if err := r.cfg.Checkpoints.Save(ctx, r.cfg.Name, batch[len(batch)-1].Position.String()); err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
		progressed = true
		return nil
	})
	return progressed, err
}
