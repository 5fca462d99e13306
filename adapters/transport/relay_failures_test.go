package transport_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/follow/followtest"
	"opledger/eventstore/memory"
)

// relayWorld is a memory log with a ledger and a relay's collaborators.
type relayWorld struct {
	t      *testing.T
	clock  *clock.Manual
	store  *memory.Store
	ledger *ledger.Handler
	checks *memCheckpoints
	pub    *memPublisher
	sa     *setaside.Memory
}

func newRelayWorld(t *testing.T) *relayWorld {
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	return &relayWorld{t: t, clock: now, store: store, ledger: h, checks: &memCheckpoints{pos: map[string]string{}}, pub: &memPublisher{}, sa: &setaside.Memory{}}
}

func (w *relayWorld) relay(tune func(*transport.RelayConfig)) *transport.Relay {
	cfg := transport.RelayConfig{
		Name: transport.RelayRefundRequests, Store: w.store, Checkpoints: w.checks, Publisher: w.pub,
		Select: transport.SelectRefundRequests, Clock: w.clock, SetAside: w.sa,
		PollMax: 10 * time.Millisecond, FailureBackoff: time.Millisecond,
		Policy: setaside.Policy{MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
	}
	if tune != nil {
		tune(&cfg)
	}
	r, err := transport.NewRelay(cfg)
	require.NoError(w.t, err)
	return r
}

// run runs r until the test ends; stop cancels it and requires it to return
// context.Canceled.
func (w *relayWorld) run(r *transport.Relay) (stop func()) {
	ctx, cancel := context.WithCancel(w.t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.ErrorIs(w.t, <-done, context.Canceled)
		})
	}
	w.t.Cleanup(stop)
	return stop
}

// poison appends a CapabilityIssued event no build can decode (an unknown
// field) to op's stream, and returns its id.
func (w *relayWorld) poison(op domain.OperationID) string {
	id := uuid.NewString()
	_, err := w.store.Append(w.t.Context(), op.StreamName(), eventstore.Any(), []eventstore.EventData{{
		ID: id, Type: domain.TypeCapabilityIssued, Data: []byte(`{"unexpected_field":true}`), Metadata: []byte(`{}`),
	}})
	require.NoError(w.t, err)
	return id
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited for %s", what)
		time.Sleep(time.Millisecond) // polling a condition with a bound
	}
}

func operations(msgs []transport.Outbound) []domain.OperationID {
	var out []domain.OperationID
	for _, m := range msgs {
		out = append(out, domain.OperationID(m.Key))
	}
	return out
}

// An event the relay cannot turn into a message is retried a bounded number
// of times, then set aside with its reason; the checkpoint moves past it and
// the healthy events around it are published, in log order.
func TestRelaySetsAsideAPoisonedEventAndPublishesTheRest(t *testing.T) {
	t.Parallel()
	w := newRelayWorld(t)
	approve(t, w.ledger, "OP-1")
	bad := w.poison("OP-BAD")
	approve(t, w.ledger, "OP-2")
	r := w.relay(nil)
	w.run(r)
	waitUntil(t, "both healthy requests", func() bool { return len(w.pub.messages()) == 2 })

	require.Equal(t, []domain.OperationID{"OP-1", "OP-2"}, operations(w.pub.messages()))
	it, ok, err := w.sa.Get(t.Context(), setaside.RoleRelay, transport.RelayRefundRequests+":"+bad)
	require.NoError(t, err)
	require.True(t, ok, "the poisoned event is recorded")
	require.True(t, it.SetAside)
	require.Equal(t, 3, it.Attempts, "retried up to the policy's bound, not forever")
	require.Equal(t, transport.ReasonRelaySelectFailed, it.Reason)
	require.Equal(t, domain.OperationID("OP-BAD"), it.OperationID)
	require.Contains(t, it.Detail, "unexpected_field")

	waitUntil(t, "the checkpoint past everything", func() bool {
		lag, err := r.Lag(t.Context())
		require.NoError(t, err)
		return lag.Events == 0
	})
	st := r.Status()
	require.Equal(t, int64(1), st.SetAside)
	require.True(t, st.Leader)
	require.Empty(t, st.Retrying)
	require.NoError(t, st.Problem())
}

// An event that fails and then relays (a transient failure) is published,
// and its recorded failures are cleared: it is not left listed as retrying.
func TestRelayClearsAnEventThatRecovers(t *testing.T) {
	t.Parallel()
	w := newRelayWorld(t)
	approve(t, w.ledger, "OP-1")
	var (
		mu    sync.Mutex
		fails = 2
	)
	flaky := func(ctx context.Context, rec eventstore.RecordedEvent) ([]transport.Outbound, error) {
		mu.Lock()
		defer mu.Unlock()
		if rec.Type == domain.TypeCapabilityIssued && fails > 0 {
			fails--
			return nil, errors.New("transient")
		}
		return transport.SelectRefundRequests(ctx, rec)
	}
	r := w.relay(func(c *transport.RelayConfig) { c.Select = flaky })
	w.run(r)
	waitUntil(t, "the request", func() bool { return len(w.pub.messages()) == 1 })
	waitUntil(t, "the failures cleared", func() bool {
		items, err := w.sa.List(t.Context(), setaside.Query{Role: setaside.RoleRelay})
		require.NoError(t, err)
		return len(items) == 0
	})
	require.Zero(t, r.Status().SetAside)
}

// A transport that cannot be reached is an outage, not the events' fault:
// the relay keeps retrying with a bounded back-off, does not stop, does not
// set anything aside, reports the failure in its status, and publishes once
// the transport is back.
func TestRelayReportsAPublishOutageAndRecovers(t *testing.T) {
	t.Parallel()
	w := newRelayWorld(t)
	approve(t, w.ledger, "OP-1")
	down := &flakyPublisher{next: w.pub, err: errors.New("dial tcp 127.0.0.1:9: connection refused")}
	r := w.relay(func(c *transport.RelayConfig) { c.Publisher = down })
	w.run(r)

	waitUntil(t, "failures reported", func() bool { return r.Status().Failures >= 5 })
	st := r.Status()
	require.True(t, st.Failing)
	require.Equal(t, transport.StagePublish, st.Stage)
	require.Contains(t, st.Err, "connection refused")
	require.False(t, st.Since.IsZero())
	require.ErrorContains(t, st.Problem(), "publish failing since")
	require.Empty(t, w.pub.messages())
	items, err := w.sa.List(t.Context(), setaside.Query{})
	require.NoError(t, err)
	require.Empty(t, items, "an outage sets nothing aside")

	down.heal()
	waitUntil(t, "the request published", func() bool { return len(w.pub.messages()) == 1 })
	waitUntil(t, "the failure cleared", func() bool { return !r.Status().Failing })
	require.NoError(t, r.Status().Problem())
	require.False(t, r.Status().LastPublishedAt.IsZero())
}

// Lag counts the events after the checkpoint and how old the first is.
func TestRelayLag(t *testing.T) {
	t.Parallel()
	w := newRelayWorld(t)
	approve(t, w.ledger, "OP-1")
	w.clock.Advance(time.Minute)
	r := w.relay(nil)
	lag, err := r.Lag(t.Context())
	require.NoError(t, err)
	require.Equal(t, int64(3), lag.Events, "requested, decided, issued")
	require.Equal(t, time.Minute, lag.Behind)
	w.run(r)
	waitUntil(t, "caught up", func() bool {
		lag, err := r.Lag(t.Context())
		require.NoError(t, err)
		return lag.Events == 0 && lag.Behind == 0
	})
}

// A relay that loses its leadership steps down: it publishes nothing while
// another holds the lock, and leads again once the lock is free.
func TestRelayPublishesOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	w := newRelayWorld(t)
	lock := &followtest.Lock{}
	mine := lock.Handle()
	r := w.relay(func(c *transport.RelayConfig) {
		c.Leader = mine
		c.LeaderRetry, c.LeaderCheck = time.Millisecond, time.Millisecond
	})
	w.run(r)
	waitUntil(t, "leading", func() bool { return r.Status().Leader })

	other := lock.Handle()
	lock.Steal(other) // the relay's session "died"; another took the lock
	approve(t, w.ledger, "OP-1")
	waitUntil(t, "stepped down", func() bool { return !r.Status().Leader })
	require.Empty(t, w.pub.messages(), "a relay that lost its lock does not publish")

	other.Release(t.Context())
	waitUntil(t, "leading again and published", func() bool { return len(w.pub.messages()) == 1 })
	require.True(t, r.Status().Leader)
}

type flakyPublisher struct {
	mu   sync.Mutex
	next transport.Publisher
	err  error
}

func (f *flakyPublisher) Publish(ctx context.Context, msgs []transport.Outbound) error {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.next.Publish(ctx, msgs)
}

func (f *flakyPublisher) heal() {
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
}
