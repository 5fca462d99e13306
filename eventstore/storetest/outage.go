package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// followCatchUp: a follow.Follower hands over the events already in the
// log, then the ones appended while it follows, in order, and stops with
// its context.
func (s suite) followCatchUp(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	existing := newEvents(5, 0)
	mustAppend(ctx, t, store, newStream("sub"), eventstore.NoStream(), existing)

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	received := make(chan eventstore.RecordedEvent)
	done := make(chan error, 1)
	f, err := follow.New(follow.Config[struct{}]{Name: "storetest", Store: store, BatchSize: 2, PollMin: time.Millisecond, PollMax: 20 * time.Millisecond,
		Handler: handlerFunc(func(ctx context.Context, batch []eventstore.RecordedEvent) error {
			if len(batch) > 2 {
				return fmt.Errorf("batch of %d events, BatchSize is 2", len(batch))
			}
			for _, e := range batch {
				select {
				case received <- e:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})})
	require.NoError(t, err)
	go func() { done <- f.Run(subCtx) }()
	receive := func(n int) []eventstore.RecordedEvent {
		t.Helper()
		var out []eventstore.RecordedEvent
		timeout := time.NewTimer(visibleBound)
		defer timeout.Stop()
		for len(out) < n {
			select {
			case e := <-received:
				out = append(out, e)
			case err := <-done:
				t.Fatalf("the follower ended early: %v", err)
			case <-timeout.C:
				t.Fatalf("the follower delivered %d of %d events within %s", len(out), n, visibleBound)
			}
		}
		return out
	}

	got := receive(len(existing))
	require.Equal(t, ids(existing), recordedIDs(got), "catch-up delivers what was there")

	live := newEvents(3, 5)
	stream := newStream("sub-live")
	next := mustAppend(ctx, t, store, stream, eventstore.NoStream(), live[:1])
	mustAppend(ctx, t, store, stream, eventstore.Exact(next), live[1:])
	more := receive(len(live))
	require.Equal(t, ids(live), recordedIDs(more), "then follows the log")
	requireIncreasing(t, append(got, more...))

	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(visibleBound):
		t.Fatalf("the follower did not return within %s of its context ending", visibleBound)
	}
}

// contextCancelled: a call on a context that has ended fails as
// unavailable (its outcome cannot be established) and writes nothing.
func (s suite) contextCancelled(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("cancelled")
	ended, cancel := context.WithCancel(ctx)
	cancel()

	_, err := store.Append(ended, stream, eventstore.Any(), newEvents(1, 0))
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "append")
	_, err = store.ReadStream(ended, stream, 0, 10)
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "read stream")
	_, err = store.ReadAll(ended, nil, 10)
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "read all")

	require.Empty(t, readStream(ctx, t, store, stream, 10))
}

// unavailable: when the store goes away, every call reports
// ErrUnavailable within a bound, never hangs, and a follower with
// MaxFailures gives up with that error.
func (s suite) unavailable(t *testing.T) {
	if len(s.cfg.outages) == 0 {
		t.Skip("backend provides no outage (WithOutage)")
	}
	for _, o := range s.cfg.outages {
		t.Run(o.Name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t)
			store, takeDown := o.Start(t)
			stream := newStream("outage")
			if o.WorksBefore {
				mustAppend(ctx, t, store, stream, eventstore.NoStream(), newEvents(1, 0))
				got, err := store.ReadStream(ctx, stream, 0, 10)
				require.NoError(t, err)
				require.Len(t, got, 1)
			}
			takeDown()

			requireUnavailable(t, "append", func(ctx context.Context) error {
				_, err := store.Append(ctx, stream, eventstore.Any(), newEvents(1, 1))
				return err
			})
			requireUnavailable(t, "append again", func(ctx context.Context) error {
				_, err := store.Append(ctx, newStream("outage"), eventstore.NoStream(), newEvents(1, 1))
				return err
			})
			requireUnavailable(t, "read stream", func(ctx context.Context) error {
				_, err := store.ReadStream(ctx, stream, 0, 10)
				return err
			})
			requireUnavailable(t, "read all", func(ctx context.Context) error {
				_, err := store.ReadAll(ctx, nil, 10)
				return err
			})
			requireUnavailable(t, "follow", func(ctx context.Context) error {
				f, err := follow.New(follow.Config[struct{}]{Name: "storetest", Store: store, MaxFailures: 3,
					FailureBackoff: time.Millisecond, MaxFailureBackoff: 10 * time.Millisecond,
					Handler: handlerFunc(func(context.Context, []eventstore.RecordedEvent) error { return nil })})
				if err != nil {
					return err
				}
				return f.Run(ctx)
			})
		})
	}
}

// requireUnavailable runs call on a context without a deadline (so a
// deadline cannot be what makes it fail) and asserts it returns an error
// wrapping ErrUnavailable within unavailableBound.
func requireUnavailable(t *testing.T, name string, call func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel() // releases a call that overran the bound
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	timeout := time.NewTimer(unavailableBound)
	defer timeout.Stop()
	select {
	case err := <-done:
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, eventstore.ErrUnavailable, name)
	case <-timeout.C:
		t.Fatalf("%s did not return within %s after the store went away", name, unavailableBound)
	}
}

// handlerFunc is a follow.Handler over a function of each batch, from the
// start of the log, that saves nothing.
type handlerFunc func(ctx context.Context, batch []eventstore.RecordedEvent) error

func (handlerFunc) Resume(context.Context) (eventstore.Position, error) { return nil, nil }
func (handlerFunc) Idle(context.Context) error                          { return nil }
func (h handlerFunc) Handle(ctx context.Context, b follow.Batch[struct{}]) (eventstore.Position, error) {
	if err := h(ctx, b.Events); err != nil {
		return nil, err
	}
	return b.Events[len(b.Events)-1].Position, nil
}
