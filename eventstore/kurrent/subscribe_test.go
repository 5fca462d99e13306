package kurrent_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// deliverBound bounds waiting for a subscription to deliver what was
// appended: it exists so a broken subscription fails the test, not to
// measure speed.
const deliverBound = 30 * time.Second

// subscription runs s.Subscribe in the background, handing every event to
// the returned channel one at a time.
type subscription struct {
	events chan eventstore.RecordedEvent
	done   chan error
	cancel context.CancelFunc
}

func subscribe(t *testing.T, s *kurrent.Store, after eventstore.Position, opts kurrent.SubscribeOptions) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	sub := &subscription{events: make(chan eventstore.RecordedEvent), done: make(chan error, 1), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		sub.done <- s.Subscribe(ctx, after, opts, func(ctx context.Context, batch []eventstore.RecordedEvent) error {
			if opts.BatchSize > 0 && len(batch) > opts.BatchSize {
				return fmt.Errorf("batch of %d events, BatchSize is %d", len(batch), opts.BatchSize)
			}
			for _, e := range batch {
				select {
				case sub.events <- e:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()
	return sub
}

// receive waits for n events.
func (sub *subscription) receive(t *testing.T, n int) []eventstore.RecordedEvent {
	t.Helper()
	var out []eventstore.RecordedEvent
	timeout := time.NewTimer(deliverBound)
	defer timeout.Stop()
	for len(out) < n {
		select {
		case e := <-sub.events:
			out = append(out, e)
		case err := <-sub.done:
			t.Fatalf("subscription ended after %d of %d events: %v", len(out), n, err)
		case <-timeout.C:
			t.Fatalf("subscription delivered %d of %d events within %s", len(out), n, deliverBound)
		}
	}
	return out
}

// stop cancels the subscription and returns what Subscribe returned.
func (sub *subscription) stop(t *testing.T) error {
	t.Helper()
	sub.cancel()
	select {
	case err := <-sub.done:
		return err
	case <-time.After(deliverBound):
		t.Fatalf("Subscribe did not return within %s of its context ending", deliverBound)
		return nil
	}
}

// TestSubscribeCatchesUpAndFollows: the server-side subscription hands over
// what is in the log after the position, in order and in bounded batches,
// then what is appended, and stops with its context.
func TestSubscribeCatchesUpAndFollows(t *testing.T) {
	onTargets(t, func(t *testing.T, tg target) {
		s := openStore(t, kurrent.Config{URL: tg.direct(t), Namespace: newNamespace(t), StreamPrefixes: everyStream})
		stream := "sub-" + uuid.NewString()[:8]
		before := newEvents(1)
		mustAppend(t, s, stream, eventstore.NoStream(), before)
		all, err := s.ReadAll(t.Context(), nil, 10)
		require.NoError(t, err)
		require.Len(t, all, 1)
		existing := newEvents(5)
		next := mustAppend(t, s, stream, eventstore.Exact(0), existing)

		sub := subscribe(t, s, all[0].Position, kurrent.SubscribeOptions{BatchSize: 2})
		got := sub.receive(t, len(existing))
		require.Equal(t, ids(existing), recordedIDs(got), "what was there after the position")

		live := newEvents(3)
		next = mustAppend(t, s, stream, eventstore.Exact(next), live[:1])
		mustAppend(t, s, stream, eventstore.Exact(next), live[1:])
		more := sub.receive(t, len(live))
		require.Equal(t, ids(live), recordedIDs(more), "then what is appended")
		got = append(got, more...)
		for i := 1; i < len(got); i++ {
			require.Negative(t, got[i-1].Position.Compare(got[i].Position))
			require.Equal(t, got[i-1].Version+1, got[i].Version)
		}
		require.ErrorIs(t, sub.stop(t), context.Canceled)
	})
}

// TestSubscribeHandlerErrorEndsIt: a failing handler ends the subscription
// with its own error, unwrapped and not retried.
func TestSubscribeHandlerErrorEndsIt(t *testing.T) {
	t.Parallel()
	s := openStore(t, kurrent.Config{URL: kurrenttest.Start(t).DirectURL()})
	mustAppend(t, s, "operation-OP-1", eventstore.NoStream(), newEvents(2))
	refused := errors.New("projection refused the batch")
	calls := 0
	err := s.Subscribe(t.Context(), nil, kurrent.SubscribeOptions{}, func(context.Context, []eventstore.RecordedEvent) error {
		calls++
		return refused
	})
	require.Equal(t, refused, err)
	require.Equal(t, 1, calls)
}

// TestSubscribeResumesAfterOutage: a subscription whose server goes away
// resumes once it is back, from the last event it handed over: nothing is
// lost and nothing is delivered twice.
func TestSubscribeResumesAfterOutage(t *testing.T) {
	t.Parallel()
	srv := kurrenttest.Start(t)
	s := openStore(t, kurrent.Config{URL: srv.URL(), CallTimeout: outageCallTimeout, ConnectTimeout: outageConnectTimeout})
	stream := "operation-OP-" + uuid.NewString()[:8]
	first := newEvents(2)
	next := mustAppend(t, s, stream, eventstore.NoStream(), first)
	sub := subscribe(t, s, nil, kurrent.SubscribeOptions{MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	require.Equal(t, ids(first), recordedIDs(sub.receive(t, len(first))))

	srv.Refuse() // cuts the subscription's connection
	require.NoError(t, srv.Resume())
	second := newEvents(2)
	var err error
	for range 20 { // bounded: the first calls after the outage may still find the old connection gone
		if _, err = s.Append(t.Context(), stream, eventstore.Exact(next), second); err == nil {
			break
		}
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
	}
	require.NoError(t, err)
	require.Equal(t, ids(second), recordedIDs(sub.receive(t, len(second))), "the events after the outage, once")
	select {
	case e := <-sub.events:
		t.Fatalf("an extra event was delivered: %s", e.ID)
	default:
	}
	require.ErrorIs(t, sub.stop(t), context.Canceled)
}

// TestSubscribeGivesUpAfterMaxUnavailable: with MaxUnavailable set,
// consecutive failures end the subscription with ErrUnavailable.
func TestSubscribeGivesUpAfterMaxUnavailable(t *testing.T) {
	t.Parallel()
	srv := kurrenttest.Start(t)
	s := openStore(t, kurrent.Config{URL: srv.URL(), CallTimeout: outageCallTimeout, ConnectTimeout: outageConnectTimeout})
	srv.Refuse()
	err := s.Subscribe(t.Context(), nil, kurrent.SubscribeOptions{MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxUnavailable: 3},
		func(context.Context, []eventstore.RecordedEvent) error { return nil })
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	require.ErrorContains(t, err, "3 consecutive failures")

	_, err = s.ReadAll(t.Context(), foreignPosition{}, 1)
	require.ErrorIs(t, err, eventstore.ErrInvalidPosition)
	err = s.Subscribe(t.Context(), foreignPosition{}, kurrent.SubscribeOptions{}, nil)
	require.ErrorIs(t, err, eventstore.ErrInvalidPosition, "another backend's position")
}
