package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain/clock"
)

// waits records the backoffs the supervisor asked for and returns at once.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) bool {
	w.mu.Lock()
	w.got = append(w.got, d)
	w.mu.Unlock()
	return ctx.Err() == nil
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.got...)
}

func testSupervisor(t *testing.T, w *waits, clk clock.Clock) *supervisor {
	t.Helper()
	return newSupervisor(superviseConfig{
		MinBackoff: time.Second, MaxBackoff: 4 * time.Second, MaxFailures: 5, StableAfter: time.Minute,
		Clock: clk, Wait: w.wait, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	}, serveRoles)
}

func statusOf(s *supervisor, name string) httpapi.RoleStatus {
	for _, st := range s.statuses(context.Background()) {
		if st.Role == name {
			return st
		}
	}
	return httpapi.RoleStatus{}
}

// TestSupervisorRestartsWithBackoff: a role that fails three times (an
// error, a nil return, a panic) is restarted after 1s, 2s, 4s and then
// runs; serve is not stopped.
func TestSupervisorRestartsWithBackoff(t *testing.T) {
	t.Parallel()
	w := &waits{}
	s := testSupervisor(t, w, clock.NewManual(time.Unix(0, 0)))
	var runs atomic.Int32
	running := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	closed := make(chan struct{})
	s.start(ctx, []role{{name: "sweeper", close: func() { close(closed) }, run: func(ctx context.Context) error {
		switch runs.Add(1) {
		case 1:
			return errors.New("sweep: store unavailable")
		case 2:
			return nil
		case 3:
			panic("index out of range")
		}
		close(running)
		<-ctx.Done()
		return ctx.Err()
	}}})
	<-running
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, w.all())
	st := statusOf(s, "sweeper")
	require.Equal(t, httpapi.RoleRunning, st.State)
	require.True(t, st.OK)
	require.Equal(t, 3, st.Restarts)
	require.Contains(t, st.LastError, "panic: index out of range")
	require.NotContains(t, st.LastError, "\n", "the stack is logged, not reported")
	require.Equal(t, httpapi.RoleDisabled, statusOf(s, "relay").State)
	select {
	case err := <-s.failures():
		t.Fatalf("serve stopped: %v", err)
	default:
	}
	cancel()
	s.wait()
	<-closed
	require.Equal(t, httpapi.RoleStopped, statusOf(s, "sweeper").State)
}

// TestSupervisorStopsServePastTheBound: a role that keeps failing is
// restarted MaxFailures-1 times with doubling (capped) backoff, then
// reported failed, and the supervisor asks serve to stop.
func TestSupervisorStopsServePastTheBound(t *testing.T) {
	t.Parallel()
	w := &waits{}
	s := testSupervisor(t, w, clock.NewManual(time.Unix(0, 0)))
	var runs atomic.Int32
	projecting := make(chan struct{})
	s.start(t.Context(), []role{
		{name: "relay", run: func(context.Context) error { runs.Add(1); return errors.New("publish: broker gone") }},
		{name: "projector", run: func(ctx context.Context) error { close(projecting); <-ctx.Done(); return ctx.Err() }},
	})
	<-projecting
	var err error
	select {
	case err = <-s.failures():
	case <-time.After(30 * time.Second):
		t.Fatal("the supervisor never gave up")
	}
	require.ErrorContains(t, err, "role relay failed 5 times in a row")
	require.ErrorContains(t, err, "broker gone")
	require.Equal(t, int32(5), runs.Load())
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, w.all())
	st := statusOf(s, "relay")
	require.Equal(t, httpapi.RoleFailed, st.State)
	require.False(t, st.OK)
	require.Equal(t, "publish: broker gone", st.Detail)
	require.True(t, statusOf(s, "projector").OK)
}

// TestSupervisorForgetsOldFailures: a run that lasted StableAfter resets
// the count and the backoff, so rare failures never add up to a stop.
func TestSupervisorForgetsOldFailures(t *testing.T) {
	t.Parallel()
	w := &waits{}
	clk := clock.NewManual(time.Unix(0, 0))
	s := testSupervisor(t, w, clk)
	var runs atomic.Int32
	done := make(chan struct{})
	s.start(t.Context(), []role{{name: "reconciler", run: func(ctx context.Context) error {
		n := runs.Add(1)
		if n == 12 {
			close(done)
			<-ctx.Done()
			return ctx.Err()
		}
		if n%2 == 0 {
			clk.Advance(time.Minute) // a long, healthy run before this failure
		}
		return errors.New("transient")
	}}})
	select {
	case <-done:
	case err := <-s.failures():
		t.Fatalf("rare failures stopped serve: %v", err)
	}
	got := w.all()
	require.Len(t, got, 11)
	for _, d := range got {
		require.LessOrEqual(t, d, 2*time.Second, "the backoff starts again after each healthy run")
	}
}

// TestSupervisorHealth: a running role whose health check fails is not OK
// and says why (the relay cannot reach its brokers).
func TestSupervisorHealth(t *testing.T) {
	t.Parallel()
	s := testSupervisor(t, &waits{}, clock.System{})
	started := make(chan struct{})
	var reachable atomic.Bool
	s.start(t.Context(), []role{{name: "relay",
		run: func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() },
		health: func(context.Context) error {
			if reachable.Load() {
				return nil
			}
			return errors.New("cannot reach Kafka at 127.0.0.1:9")
		},
	}})
	<-started
	require.Eventually(t, func() bool { return statusOf(s, "relay").State == httpapi.RoleRunning }, 10*time.Second, time.Millisecond)
	st := statusOf(s, "relay")
	require.False(t, st.OK)
	require.Equal(t, "cannot reach Kafka at 127.0.0.1:9", st.Detail)
	reachable.Store(true)
	require.True(t, statusOf(s, "relay").OK)
}
