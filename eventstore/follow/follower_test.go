package follow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/follow"
	"opledger/eventstore/follow/followtest"
	"opledger/eventstore/memory"
)

// newLog is a memory store with n events in one stream, recorded a minute
// apart from start.
func newLog(t *testing.T, n int, start time.Time) *memory.Store {
	t.Helper()
	var mu sync.Mutex
	at := start
	store := memory.New(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := at
		at = at.Add(time.Minute)
		return now
	})
	for i := range n {
		_, err := store.Append(t.Context(), "s-1", eventstore.Any(), []eventstore.EventData{{
			ID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1), Type: "Tested", Data: fmt.Appendf(nil, `{"n":%d}`, i),
		}})
		require.NoError(t, err)
	}
	return store
}

// recorder is a Handler that keeps what it handled and saves its position
// in memory; fail, when set, decides each batch's error.
type recorder struct {
	mu      sync.Mutex
	saved   eventstore.Position
	got     []string // event ids handled, in order
	batches int
	resumes int
	idles   int
	fail    func(b follow.Batch[int]) error
}

func (r *recorder) Resume(context.Context) (eventstore.Position, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumes++
	return r.saved, nil
}

func (r *recorder) Handle(ctx context.Context, b follow.Batch[int]) (eventstore.Position, error) {
	if err := b.Lead(ctx); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches++
	if b.Prepared != len(b.Events) {
		return nil, fmt.Errorf("prepared %d for %d events", b.Prepared, len(b.Events))
	}
	if r.fail != nil {
		if err := r.fail(b); err != nil {
			return nil, err
		}
	}
	for _, e := range b.Events {
		r.got = append(r.got, e.ID)
	}
	r.saved = b.Events[len(b.Events)-1].Position
	return r.saved, nil
}

func (r *recorder) Idle(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idles++
	return nil
}

func (r *recorder) snapshot() (got []string, resumes, idles int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...), r.resumes, r.idles
}

func newFollower(t *testing.T, store eventstore.Store, h follow.Handler[int], tune func(*follow.Config[int])) *follow.Follower[int] {
	t.Helper()
	cfg := follow.Config[int]{
		Name: "test", Store: store, Handler: h, BatchSize: 2, ReadAhead: true,
		Prepare: func(events []eventstore.RecordedEvent) int { return len(events) },
		PollMin: time.Millisecond, PollMax: 5 * time.Millisecond,
		LeaderRetry: time.Millisecond, LeaderCheck: time.Millisecond,
		FailureBackoff: time.Millisecond, MaxFailureBackoff: 5 * time.Millisecond,
	}
	if tune != nil {
		tune(&cfg)
	}
	f, err := follow.New(cfg)
	require.NoError(t, err)
	return f
}

// run runs f until the test ends; stop cancels it and requires it to
// return context.Canceled.
func run(t *testing.T, f *follow.Follower[int]) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited for %s", what)
		time.Sleep(time.Millisecond) // polling a condition with a bound
	}
}

func eventIDs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
	}
	return out
}

// A follower hands every event to its handler once, in order, in batches of
// at most BatchSize (each prepared), then follows what is appended, and
// tells the handler when the log is idle.
func TestFollowerHandsOverTheLogInOrder(t *testing.T) {
	t.Parallel()
	store := newLog(t, 5, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	h := &recorder{}
	f := newFollower(t, store, h, nil)
	run(t, f)
	waitUntil(t, "the five events", func() bool { got, _, _ := h.snapshot(); return len(got) == 5 })
	_, err := store.Append(t.Context(), "s-2", eventstore.Any(), []eventstore.EventData{{ID: eventIDs(6, 6)[0], Type: "Tested"}})
	require.NoError(t, err)
	waitUntil(t, "the appended event", func() bool { got, _, _ := h.snapshot(); return len(got) == 6 })
	waitUntil(t, "an idle log", func() bool { _, _, idles := h.snapshot(); return idles > 0 })
	got, resumes, _ := h.snapshot()
	require.Equal(t, eventIDs(1, 6), got)
	require.Equal(t, 1, resumes, "resumed once, when it started leading")
	require.True(t, f.Status().Leading)
	require.False(t, f.Status().Failing)
}

// An outage in Handle is retried with a back-off and reported in Status;
// the follower resumes from what the handler saved, and the streak ends
// once a batch is handled. With MaxFailures, that many in a row end Run.
func TestFollowerBacksOffAnOutageAndResumes(t *testing.T) {
	t.Parallel()
	store := newLog(t, 3, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	var (
		mu   sync.Mutex
		down = true
	)
	h := &recorder{fail: func(follow.Batch[int]) error {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return follow.AtStage("publish", errors.New("connection refused"))
		}
		return nil
	}}
	f := newFollower(t, store, h, nil)
	run(t, f)
	waitUntil(t, "failures reported", func() bool { return f.Status().Failures >= 3 })
	st := f.Status()
	require.True(t, st.Failing)
	require.Equal(t, "publish", st.Stage)
	require.Contains(t, st.Err, "connection refused")
	require.False(t, st.Since.IsZero())
	_, resumes, _ := h.snapshot()
	require.GreaterOrEqual(t, resumes, 3, "resumed from the saved position after each outage")

	mu.Lock()
	down = false
	mu.Unlock()
	waitUntil(t, "the three events", func() bool { got, _, _ := h.snapshot(); return len(got) == 3 })
	waitUntil(t, "the streak ended", func() bool { return !f.Status().Failing })
	got, _, _ := h.snapshot()
	require.Equal(t, eventIDs(1, 3), got, "nothing handled twice: the handler saved nothing before")

	bounded := newFollower(t, store, &recorder{fail: func(follow.Batch[int]) error { return errors.New("down") }},
		func(c *follow.Config[int]) { c.MaxFailures = 3 })
	err := bounded.Run(t.Context())
	require.ErrorContains(t, err, "3 consecutive failures")
}

// Retry is not an outage: the follower keeps the position Handle returned,
// pauses as asked and reads again from there. Reload makes it resume, at
// once and without counting a failure.
func TestFollowerRetriesAndReloadsWithoutAnOutage(t *testing.T) {
	t.Parallel()
	store := newLog(t, 4, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	var (
		mu      sync.Mutex
		retries = 2
		reloads = 1
	)
	h := &recorder{}
	h.fail = func(b follow.Batch[int]) error {
		mu.Lock()
		defer mu.Unlock()
		if b.Events[0].ID == eventIDs(3, 3)[0] && retries > 0 {
			retries--
			return follow.Retry(time.Millisecond, errors.New("event 3 failed"))
		}
		if reloads > 0 {
			reloads--
			return follow.Reload(errors.New("checkpoint moved"))
		}
		return nil
	}
	f := newFollower(t, store, h, nil)
	run(t, f)
	waitUntil(t, "the four events", func() bool { got, _, _ := h.snapshot(); return len(got) == 4 })
	got, resumes, _ := h.snapshot()
	require.Equal(t, eventIDs(1, 4), got)
	require.Equal(t, 2, resumes, "resumed when it started leading, and once for the reload")
	require.False(t, f.Status().Failing)
	require.Zero(t, f.Status().Failures)
}

// A follower that loses its leadership steps down and handles nothing while
// another holds the lock; a standby is healthy; it leads again once the lock
// is free.
func TestFollowerHandlesOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	store := newLog(t, 1, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	lock := &followtest.Lock{}
	mine := lock.Handle()
	h := &recorder{}
	f := newFollower(t, store, h, func(c *follow.Config[int]) { c.Leader = mine })
	run(t, f)
	waitUntil(t, "the first event", func() bool { got, _, _ := h.snapshot(); return len(got) == 1 })

	other := lock.Handle()
	lock.Steal(other) // the follower's session "died"; another took the lock
	waitUntil(t, "stepped down", func() bool { return !f.Status().Leading })
	_, err := store.Append(t.Context(), "s-2", eventstore.Any(), []eventstore.EventData{{ID: eventIDs(2, 2)[0], Type: "Tested"}})
	require.NoError(t, err)
	require.False(t, f.Status().Failing, "a standby is healthy")
	got, _, _ := h.snapshot()
	require.Len(t, got, 1, "a follower that lost its lock handles nothing")

	other.Release(t.Context())
	waitUntil(t, "leading again and handled", func() bool { got, _, _ := h.snapshot(); return len(got) == 2 })
	require.True(t, f.Status().Leading)
}

// CatchUp handles the log to its end under the leadership, counts what it
// handled and releases the lock; the first failure ends it.
func TestFollowerCatchUp(t *testing.T) {
	t.Parallel()
	store := newLog(t, 5, time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC))
	lock := &followtest.Lock{}
	h := &recorder{}
	n, err := newFollower(t, store, h, func(c *follow.Config[int]) { c.Leader = lock.Handle() }).CatchUp(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(5), n)
	got, _, _ := h.snapshot()
	require.Equal(t, eventIDs(1, 5), got)
	held, err := lock.Handle().TryAcquire(t.Context())
	require.NoError(t, err)
	require.True(t, held, "released")

	failing := &recorder{fail: func(b follow.Batch[int]) error {
		if b.Events[0].ID == eventIDs(3, 3)[0] {
			return follow.Retry(time.Hour, errors.New("event 3 failed"))
		}
		return nil
	}}
	n, err = newFollower(t, store, failing, nil).CatchUp(t.Context())
	require.ErrorContains(t, err, "event 3 failed")
	require.Equal(t, int64(2), n)
}

// MeasureLag counts the events after a position, up to its bound, and how
// old the first is on the clock it is given.
func TestMeasureLag(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	store := newLog(t, 5, start)
	all, err := store.ReadAll(t.Context(), nil, 10)
	require.NoError(t, err)

	lag, err := follow.MeasureLag(t.Context(), store, all[1].Position, follow.LagOptions{Now: start.Add(10 * time.Minute)})
	require.NoError(t, err)
	require.Equal(t, follow.Lag{Events: 3, Behind: 8 * time.Minute}, lag, "the third event was recorded at 14:02")

	lag, err = follow.MeasureLag(t.Context(), store, nil, follow.LagOptions{Now: start, MaxEvents: 4,
		EventTime: func(eventstore.RecordedEvent) time.Time { return start.Add(-time.Hour) }})
	require.NoError(t, err)
	require.Equal(t, follow.Lag{Events: 4, Capped: true, Behind: time.Hour}, lag)

	lag, err = follow.MeasureLag(t.Context(), store, all[4].Position, follow.LagOptions{Now: start})
	require.NoError(t, err)
	require.Zero(t, lag, "caught up")
}
