package kurrent_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
)

// returnSlack is how much later than its timeout a call may return:
// scheduling, never waiting on the client.
const returnSlack = 2 * time.Second

// slowClient makes the client library itself slow to give up: three
// discovery attempts of up to 30s each, a second apart. A call that returns
// within the store's timeout then proves the store's own bound.
func slowClient(url string) string {
	return url + "&maxDiscoverAttempts=3&discoveryInterval=1000&gossipTimeout=30"
}

// servers that cannot be used, each as a way to get one.
var unusable = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"nothing-listening", func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		return "esdb://" + addr + "?tls=false"
	}},
	{"refusing", func(t *testing.T) string {
		s := kurrenttest.Start(t)
		s.Refuse()
		return s.URL()
	}},
	{"unanswered", func(t *testing.T) string {
		s := kurrenttest.Start(t)
		require.NoError(t, s.Blackhole())
		return s.URL()
	}},
}

// TestOpenUnreachable: Open fails with ErrUnavailable within its connect
// timeout whether nothing listens, the server refuses, or it accepts and
// never answers.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	for _, u := range unusable {
		t.Run(u.name, func(t *testing.T) {
			t.Parallel()
			const connect = 500 * time.Millisecond
			url := slowClient(u.url(t))
			start := time.Now()
			s, err := kurrent.Open(t.Context(), kurrent.Config{URL: url, ConnectTimeout: connect, CallTimeout: time.Second})
			took := time.Since(start)
			if s != nil {
				s.Close()
			}
			require.ErrorIs(t, err, eventstore.ErrUnavailable)
			require.Less(t, took, connect+returnSlack, "Open returned after %s", took)
		})
	}
}

// takeDowns are the ways a working server goes away.
var takeDowns = []struct {
	name string
	down func(t *testing.T, s *kurrenttest.Server)
}{
	{"refused", func(t *testing.T, s *kurrenttest.Server) { s.Refuse() }},
	{"unanswered", func(t *testing.T, s *kurrenttest.Server) { require.NoError(t, s.Blackhole()) }},
}

// TestCallsReturnWithinTimeoutThenRecover: when the server goes away under
// a connected store, many calls at once (the client's worst case: the first
// calls after a broken connection) all fail with ErrUnavailable within
// their timeout; an append whose outcome was unknown, retried with the same
// ids once the server is back, is stored once (the server deduplicates the
// ids); and the store works again on a new client.
func TestCallsReturnWithinTimeoutThenRecover(t *testing.T) {
	t.Parallel()
	for _, td := range takeDowns {
		t.Run(td.name, func(t *testing.T) {
			t.Parallel()
			const callTimeout = time.Second
			srv := kurrenttest.Start(t)
			s := openStore(t, kurrent.Config{
				URL: slowClient(srv.URL()), StreamPrefixes: everyStream, Namespace: newNamespace(t),
				CallTimeout: callTimeout, ConnectTimeout: 500 * time.Millisecond,
			})
			stream := "gone-" + uuid.NewString()[:8]
			first := newEvents(1)
			mustAppend(t, s, stream, eventstore.NoStream(), first)
			td.down(t, srv)

			unknown := newEvents(2) // appended while the server is gone: outcome unknown
			calls := []func(ctx context.Context) error{
				func(ctx context.Context) error {
					_, err := s.Append(ctx, stream, eventstore.Exact(0), unknown)
					return err
				},
				func(ctx context.Context) error {
					_, err := s.ReadStream(ctx, stream, 0, 10)
					return err
				},
				func(ctx context.Context) error {
					_, err := s.ReadAll(ctx, nil, 10)
					return err
				},
			}
			const callers = 16
			errs, took := make([]error, callers), make([]time.Duration, callers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					t0 := time.Now()
					errs[i] = calls[i%len(calls)](t.Context())
					took[i] = time.Since(t0)
				})
			}
			close(start)
			wg.Wait()
			for i := range callers {
				require.ErrorIs(t, errs[i], eventstore.ErrUnavailable, "caller %d", i)
				require.Less(t, took[i], callTimeout+returnSlack, "caller %d returned after %s", i, took[i])
			}

			require.NoError(t, srv.Resume())
			var (
				res eventstore.AppendResult
				err error
			)
			for range 20 { // bounded: a probe begun during the outage may still fail once
				if res, err = s.Append(t.Context(), stream, eventstore.Exact(0), unknown); err == nil {
					break
				}
				require.ErrorIs(t, err, eventstore.ErrUnavailable)
			}
			require.NoError(t, err, "the store works again once the server is back")
			require.Equal(t, int64(2), res.NextExpectedVersion)
			got, err := s.ReadStream(t.Context(), stream, 0, 10)
			require.NoError(t, err)
			require.Equal(t, append(ids(first), ids(unknown)...), recordedIDs(got), "the retried append landed once")
		})
	}
}

// TestCloseWithCallsInFlight: Close while calls hang on an unanswering
// server neither panics (the client's Close would, under calls in flight)
// nor waits for the calls' timeout: it cancels them, and they and every
// later call fail with ErrUnavailable.
func TestCloseWithCallsInFlight(t *testing.T) {
	t.Parallel()
	const callTimeout = 30 * time.Second // longer than the test may take: Close must end the calls
	srv := kurrenttest.Start(t)
	s, err := kurrent.Open(t.Context(), kurrent.Config{URL: srv.URL(), StreamPrefixes: everyStream, Namespace: newNamespace(t), CallTimeout: callTimeout})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	stream := "closing-" + uuid.NewString()[:8]
	mustAppend(t, s, stream, eventstore.NoStream(), newEvents(1))
	require.NoError(t, srv.Blackhole())

	const callers = 8
	errs := make(chan error, callers)
	for i := range callers {
		go func() {
			if i%2 == 0 {
				_, err := s.ReadStream(t.Context(), stream, 0, 10)
				errs <- err
				return
			}
			_, err := s.Append(t.Context(), stream, eventstore.Exact(0), newEvents(1))
			errs <- err
		}()
	}
	for range 1000 { // bounded poll: the calls are running within milliseconds
		if kurrent.InFlight(s) == callers {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, callers, kurrent.InFlight(s), "calls in flight before Close")

	closed := time.Now()
	s.Close()
	for range callers {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, eventstore.ErrUnavailable)
		case <-time.After(returnSlack):
			t.Fatalf("a call was still running %s after Close", returnSlack)
		}
	}
	require.Less(t, time.Since(closed), returnSlack, "Close waited for the calls' timeout")
	_, err = s.ReadStream(t.Context(), stream, 0, 10)
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "a call after Close")
	_, err = s.Append(t.Context(), stream, eventstore.Any(), newEvents(1))
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "an append after Close")
}
