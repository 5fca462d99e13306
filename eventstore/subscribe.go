package eventstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// SubscribeOptions tunes a catch-up subscription. Zero values take defaults.
type SubscribeOptions struct {
	// BatchSize bounds the events read and handed over at once (default 500).
	BatchSize int
	// MinBackoff is the first pause after an empty read (default 10ms); the
	// pause doubles on each further empty read up to MaxBackoff (default 1s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// Wake, when set, cuts a pause short: a coalesced notifier outside the
	// write path can signal that something was appended.
	Wake <-chan struct{}
	// MaxUnavailable bounds consecutive ErrUnavailable reads before Subscribe
	// gives up and returns the error (default 0: retry for as long as ctx lives,
	// backing off to MaxBackoff).
	MaxUnavailable int
}

func (o *SubscribeOptions) setDefaults() {
	o.BatchSize = cmp.Or(o.BatchSize, 500)
	o.MinBackoff = cmp.Or(o.MinBackoff, 10*time.Millisecond)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, time.Second)
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
}

// Handler receives a batch of events in global order. Returning an error stops
// the subscription with that error; the batch is then not considered handled.
type Handler func(ctx context.Context, events []RecordedEvent) error

// Subscribe is a polling catch-up subscription over the global log: it hands
// every event after `after` to handle, in order, batch by batch, and then
// follows the log as it grows, until ctx ends (it then returns ctx.Err()) or
// handle fails. It is the caller's job to persist the position of the last
// event it handled.
func Subscribe(ctx context.Context, store Store, after Position, opts SubscribeOptions, handle Handler) error {
	opts.setDefaults()
	backoff := opts.MinBackoff
	unavailable := 0
	timer := time.NewTimer(opts.MaxBackoff)
	timer.Stop() // armed only while pausing (Go 1.23+ timers: Stop/Reset need no draining)
	defer timer.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := store.ReadAll(ctx, after, opts.BatchSize)
		switch {
		case err == nil:
			unavailable = 0
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			unavailable++
			if opts.MaxUnavailable > 0 && unavailable >= opts.MaxUnavailable {
				return fmt.Errorf("subscribe: %d consecutive failed reads: %w", unavailable, err)
			}
			batch = nil
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("subscribe: %w", err)
		}
		if len(batch) > 0 {
			if err := handle(ctx, batch); err != nil {
				return err
			}
			after = batch[len(batch)-1].Position
			backoff = opts.MinBackoff
			if len(batch) == opts.BatchSize {
				continue // more is waiting: read again at once
			}
		}
		timer.Reset(backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-opts.Wake:
			timer.Stop()
			backoff = opts.MinBackoff
			continue
		case <-timer.C:
		}
		backoff = min(backoff*2, opts.MaxBackoff)
	}
}
