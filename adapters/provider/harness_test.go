package provider_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a simulator served by httptest and the sends a client reported.
type env struct {
	t       *testing.T
	profile domain.ProviderProfile // the built-in profile of the simulated provider
	sim     *sim.Simulator
	srv     *httptest.Server
	sends   *sendLog
}

func newEnv(t *testing.T, profile sim.Profile) *env {
	t.Helper()
	s, err := sim.New(sim.Config{Profile: profile, Start: t0, Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close) // before srv.Close: ends holds and delays
	p, ok := provider.BuiltinProfile(string(profile))
	require.True(t, ok, profile)
	return &env{t: t, profile: p, sim: s, srv: srv, sends: &sendLog{}}
}

// client returns a client of the simulator whose back-off elapses at once,
// so retries need no waiting; adjust may change any of it.
func (e *env) client(adjust ...func(*provider.Config)) *provider.Client {
	e.t.Helper()
	cfg := provider.Config{
		Profile:  e.profile,
		BaseURL:  e.srv.URL,
		Observer: e.sends,
		After:    immediately,
	}
	for _, f := range adjust {
		f(&cfg)
	}
	c, err := provider.New(cfg)
	require.NoError(e.t, err)
	return c
}

func immediately(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}

func maxAttempts(n int) func(*provider.Config) {
	return func(c *provider.Config) { c.MaxAttempts = n }
}

func (e *env) arm(f sim.Fault) {
	e.t.Helper()
	require.NoError(e.t, e.sim.Arm(f))
}

// requireLedger asserts the simulator's totals.
func (e *env) requireLedger(received, created, lookups int) {
	e.t.Helper()
	require.Equal(e.t, sim.Counters{RequestsReceived: received, RefundsCreated: created, Lookups: lookups},
		e.sim.Ledger().Counters)
}

// requireOneKey asserts that every request the simulator received carried key.
func (e *env) requireOneKey(key domain.IdempotencyKey) {
	e.t.Helper()
	for _, r := range e.sim.Ledger().Requests {
		require.Equal(e.t, string(key), r.IdempotencyKey, "request %d", r.Seq)
	}
	for _, s := range e.sends.all() {
		require.Equal(e.t, key, s.IdempotencyKey)
	}
}

// onlyRefundID is the id of the one refund the simulator created.
func (e *env) onlyRefundID() string {
	e.t.Helper()
	var ids []string
	for _, r := range e.sim.Ledger().Requests {
		if r.RefundID != "" {
			ids = append(ids, r.RefundID)
		}
	}
	require.Len(e.t, ids, 1)
	return ids[0]
}

func refundRequest(op string) domain.RefundRequest {
	id := domain.OperationID(op)
	return domain.RefundRequest{
		OperationID: id, OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		IdempotencyKey: domain.IdempotencyKeyFor(id, 1),
	}
}

// sendLog is an Observer that keeps every send.
type sendLog struct {
	mu    sync.Mutex
	sends []provider.Send
}

func (l *sendLog) ObserveSend(_ context.Context, s provider.Send) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends = append(l.sends, s)
}

func (l *sendLog) all() []provider.Send {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]provider.Send(nil), l.sends...)
}

func (l *sendLog) statuses() []int {
	var out []int
	for _, s := range l.all() {
		out = append(out, s.StatusCode)
	}
	return out
}

func (l *sendLog) outcomes() []domain.Outcome {
	var out []domain.Outcome
	for _, s := range l.all() {
		out = append(out, s.Outcome)
	}
	return out
}
