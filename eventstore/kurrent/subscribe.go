package kurrent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// Defaults for SubscribeOptions.
const (
	defaultBatchSize  = 500
	defaultMinBackoff = 10 * time.Millisecond
	defaultMaxBackoff = time.Second
)

// SubscribeOptions tunes Subscribe. Zero values take defaults.
type SubscribeOptions struct {
	// BatchSize bounds the events handed over at once (default 500).
	BatchSize int
	// MinBackoff is the first pause after the subscription dropped (default
	// 10ms); it doubles on each further drop up to MaxBackoff (default 1s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxUnavailable bounds consecutive failures before Subscribe gives up
	// and returns the error (default 0: resubscribe for as long as ctx
	// lives).
	MaxUnavailable int
}

// Handler receives a batch of events in global order. Returning an error
// stops the subscription with that error; the batch is then not considered
// handled.
type Handler func(ctx context.Context, events []eventstore.RecordedEvent) error

// handlerError carries a Handler's failure out of follow, so that Subscribe
// returns it as it is and does not resubscribe.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }
func (e handlerError) Unwrap() error { return e.err }

// Subscribe follows the global log with a server-side catch-up
// subscription to $all, filtered by the server to the store's streams, and
// hands the events after `after` to handle in order, in batches of at most
// opts.BatchSize, as they come: pushed by the server instead of polled (the
// roles poll with follow.Follower, over any store). It returns ctx.Err() when ctx ends and handle's error, as it is, when handle
// fails; the caller persists the position of the last event it handled.
//
// A dropped subscription (server gone, connection cut, client retired) is
// resumed from the last handled event after a pause of opts.MinBackoff,
// doubling up to opts.MaxBackoff, and reset by any delivered batch. With
// opts.MaxUnavailable > 0, that many consecutive failures end Subscribe with
// an error wrapping eventstore.ErrUnavailable; other errors (a closed store,
// access denied) end it at once.
func (s *Store) Subscribe(ctx context.Context, after eventstore.Position, opts SubscribeOptions, handle Handler) error {
	if _, err := subscribeFrom(after); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	opts.BatchSize = cmp.Or(opts.BatchSize, defaultBatchSize)
	opts.MinBackoff = cmp.Or(opts.MinBackoff, defaultMinBackoff)
	opts.MaxBackoff = max(cmp.Or(opts.MaxBackoff, defaultMaxBackoff), opts.MinBackoff)

	backoff, failures := opts.MinBackoff, 0
	timer := time.NewTimer(opts.MaxBackoff)
	timer.Stop() // armed only while pausing
	defer timer.Stop()
	// Bounded by ctx, and by MaxUnavailable when set: each round either
	// delivers events or counts a failure and pauses.
	for {
		progressed, err := s.follow(ctx, &after, opts.BatchSize, handle)
		var herr handlerError
		switch {
		case errors.As(err, &herr):
			return herr.err
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, eventstore.ErrUnavailable), errors.Is(err, errClosed):
			return err
		}
		if progressed {
			failures, backoff = 0, opts.MinBackoff
		}
		failures++
		if opts.MaxUnavailable > 0 && failures >= opts.MaxUnavailable {
			return fmt.Errorf("subscribe: %d consecutive failures: %w", failures, err)
		}
		s.cfg.Logger.DebugContext(ctx, "kurrent: subscription dropped; resubscribing", "after", after, "pause", backoff, "err", err)
		timer.Reset(backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		backoff = min(2*backoff, opts.MaxBackoff)
	}
}

// follow runs one subscription from *after until it drops, ctx ends or
// handle fails, advancing *after past every batch handled. Starting the
// subscription is bounded by CallTimeout; the client stays counted in
// flight until the subscription's receiving goroutine has ended.
func (s *Store) follow(ctx context.Context, after *eventstore.Position, batchSize int, handle Handler) (progressed bool, err error) {
	const op = "subscribe"
	from, err := subscribeFrom(*after)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	startCtx, cancelStart := context.WithTimeoutCause(subCtx, s.cfg.CallTimeout, fmt.Errorf("%w (%s)", errCallTimeout, s.cfg.CallTimeout))
	defer cancelStart()

	cl, err := s.conn.acquire(startCtx)
	if err != nil {
		return false, interpretError(op, err)
	}
	messages := make(chan *esdb.SubscriptionEvent, batchSize)
	started := make(chan error, 1)
	go func() {
		defer s.conn.release(cl)
		defer close(messages)
		sub, err := cl.es.SubscribeToAll(subCtx, esdb.SubscribeToAllOptions{From: from, Filter: s.names.filter()})
		started <- err
		if err != nil {
			return
		}
		defer sub.Close()
		// Bounded by the subscription: Recv reports a drop once subCtx ends.
		for {
			m := sub.Recv()
			select {
			case messages <- m:
			case <-subCtx.Done():
				return
			}
			if m.SubscriptionDropped != nil {
				return
			}
		}
	}()
	select {
	case err = <-started:
	case <-startCtx.Done():
		err = context.Cause(startCtx)
	}
	if err != nil {
		if ctx.Err() == nil && isConnectionFailure(err) {
			s.conn.retire(cl)
		}
		return false, interpretError(op, err)
	}

	// Bounded by the subscription: each round hands over a batch or ends.
	for {
		batch, drop, err := s.nextBatch(ctx, messages, batchSize)
		if err != nil {
			return progressed, err
		}
		if len(batch) > 0 {
			if err := handle(ctx, batch); err != nil {
				return progressed, handlerError{err}
			}
			*after = batch[len(batch)-1].Position
			progressed = true
		}
		if drop != nil {
			if ctx.Err() == nil && isConnectionFailure(drop) {
				s.conn.retire(cl)
			}
			return progressed, interpretError(op, drop)
		}
	}
}

// nextBatch waits for the next message, then takes the events already
// waiting, up to batchSize of them, and reports a drop that came with them.
// err is ctx's when it ended.
func (s *Store) nextBatch(ctx context.Context, messages <-chan *esdb.SubscriptionEvent, batchSize int) (batch []eventstore.RecordedEvent, drop, err error) {
	var m *esdb.SubscriptionEvent
	select {
	case m = <-messages:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	// Bounded: at most batchSize events are kept, and the channel holds at
	// most batchSize messages besides.
	for range 2*batchSize + 1 {
		switch {
		case m == nil: // the receiving goroutine ended without a drop message
			return batch, errors.New("subscription ended"), nil
		case m.SubscriptionDropped != nil:
			return batch, dropped(m.SubscriptionDropped), nil
		case m.EventAppeared != nil:
			e := m.EventAppeared.OriginalEvent()
			if stream, ok := s.names.inLog(e); ok {
				rec, err := recorded(stream, e)
				if err != nil {
					return nil, nil, fmt.Errorf("subscribe: %w", err)
				}
				batch = append(batch, rec)
			}
		}
		if len(batch) == batchSize {
			return batch, nil, nil
		}
		select {
		case next, ok := <-messages:
			if !ok {
				next = nil
			}
			m = next
		default:
			return batch, nil, nil
		}
	}
	return batch, nil, nil
}
