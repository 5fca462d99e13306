package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// start is the rig clock's first reading: Thursday 14:02:10 UTC of the story.
var start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

const (
	lease      = 60 * time.Second
	renewEvery = lease / 3
	waitBound  = 10 * time.Second // bounds every wait for a condition
)

// rig is one worker's world on the memory store: a manual clock, the real
// command handler, one approved operation. Its After is the worker's: a
// renewal timer (a third of the lease) fires only when the test fires it
// (renewals); any other wait (a recording back-off) is logged in pauses,
// moves the clock by its length and fires at once, after calling onPause,
// so that outages can be timed on the injected clock without sleeping.
type rig struct {
	t     *testing.T
	clk   *clock.Manual
	store *flakyStore
	h     *ledger.Handler
	op    domain.OperationID
	capID domain.CapabilityID

	renewals chan chan time.Time

	mu      sync.Mutex
	pauses  []time.Duration
	onPause func(now time.Time)
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, clk: clock.NewManual(start), renewals: make(chan chan time.Time, 64), op: "OP-4471"}
	r.store = &flakyStore{Store: memory.New(r.clk.Now)}
	var err error
	r.h, err = ledger.New(ledger.Config{Store: r.store, Clock: r.clk, Logger: quiet(t), AppendRetryBackoff: time.Microsecond})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = r.h.RequestOperation(ctx, domain.RequestOperation{
		OperationID: r.op, OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR", OrderTotalMinor: 24000, CorrelationID: "COR-2210",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	d, _, err := r.h.Decide(ctx, r.op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	require.Equal(t, domain.Allowed, d.Verdict)
	c, err := r.h.IssueCapability(ctx, r.op, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	require.NoError(t, err)
	r.capID = c.CapabilityID
	return r
}

func quiet(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// after is the worker's After.
func (r *rig) after(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if d == renewEvery {
		r.renewals <- ch
		return ch
	}
	r.mu.Lock()
	r.pauses = append(r.pauses, d)
	hook := r.onPause
	r.mu.Unlock()
	now := r.clk.Advance(d)
	if hook != nil {
		hook(now)
	}
	ch <- now
	return ch
}

// paused returns the recording back-offs the worker waited.
func (r *rig) paused() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.pauses...)
}

func (r *rig) worker(p domain.Provider) *worker.Worker {
	r.t.Helper()
	w, err := worker.New(worker.Config{
		ID: "worker-a", Ledger: r.h, Provider: p, Clock: r.clk, Logger: quiet(r.t),
		LeaseDuration: lease, ProviderTimeout: 30 * time.Second, After: r.after,
	})
	require.NoError(r.t, err)
	return w
}

func (r *rig) delivery(msg domain.MessageID) worker.Delivery {
	return worker.Delivery{MessageID: msg, CorrelationID: "COR-2210", OperationID: r.op, CapabilityID: r.capID}
}

// state reloads the operation from the store.
func (r *rig) state() *domain.Operation {
	r.t.Helper()
	s, err := r.h.Load(r.t.Context(), r.op)
	require.NoError(r.t, err)
	return s
}

// events decodes the operation's stream and its evidence stream, in the
// order of the log.
func (r *rig) events() []domain.Event {
	r.t.Helper()
	recs, err := r.store.Store.ReadStream(r.t.Context(), r.op.StreamName(), 0, 10_000)
	require.NoError(r.t, err)
	evidence, err := r.store.Store.ReadStream(r.t.Context(), domain.EvidenceStreamOf(r.op), 0, 10_000)
	require.NoError(r.t, err)
	recs = append(recs, evidence...)
	slices.SortFunc(recs, func(a, b eventstore.RecordedEvent) int { return a.Position.Compare(b.Position) })
	out := make([]domain.Event, len(recs))
	for i, rec := range recs {
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(r.t, err)
		e := dec.Event
		out[i] = e
	}
	return out
}

// count counts the stream's events of type typ.
func (r *rig) count(typ string) int {
	n := 0
	for _, e := range r.events() {
		if e.EventType() == typ {
			n++
		}
	}
	return n
}

// nextRenewal waits for the worker to arm its next renewal timer.
func (r *rig) nextRenewal() chan time.Time {
	r.t.Helper()
	select {
	case ch := <-r.renewals:
		return ch
	case <-time.After(waitBound):
		r.t.Fatalf("the worker armed no renewal timer within %s", waitBound)
		return nil
	}
}

// eventually polls cond every millisecond, failing after waitBound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitBound, what)
		}
		time.Sleep(time.Millisecond) // polling interval, not a wait for a condition
	}
}

// simulator is the provider simulator in process, on the rig's clock, and
// the real HTTP client talking to it (one send per call: no client retry).
func (r *rig) simulator() (*sim.Simulator, *provider.Client) {
	r.t.Helper()
	s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV1, Clock: r.clk.Now})
	require.NoError(r.t, err)
	srv := httptest.NewServer(s)
	r.t.Cleanup(func() { srv.Close(); s.Close() })
	c, err := provider.New(provider.Config{BaseURL: srv.URL, MaxAttempts: 1, Timeout: 10 * time.Second})
	require.NoError(r.t, err)
	return s, c
}

// flakyStore is the memory store with outages: down makes every call fail
// with ErrUnavailable (memory.Store.SetUnavailable); failAppendsOf makes only
// appends carrying an event of that type fail, so that the rest (renewals)
// still gets through.
type flakyStore struct {
	*memory.Store
	mu            sync.Mutex
	failAppendsOf string
	failed        int
}

func (f *flakyStore) failAppends(typ string) {
	f.mu.Lock()
	f.failAppendsOf = typ
	f.mu.Unlock()
}

func (f *flakyStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	f.mu.Lock()
	typ := f.failAppendsOf
	f.mu.Unlock()
	for _, e := range events {
		if typ != "" && e.Type == typ {
			f.mu.Lock()
			f.failed++
			f.mu.Unlock()
			return eventstore.AppendResult{}, eventstore.Unavailable("append "+stream, errors.New("test: this append does not reach the store"))
		}
	}
	return f.Store.Append(ctx, stream, expected, events)
}

// afterCall wraps a provider: then runs once CreateRefund returned, before
// the worker records anything (a store outage starting at that moment).
type afterCall struct {
	domain.Provider
	then func()
}

func (a afterCall) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	res := a.Provider.CreateRefund(ctx, req)
	a.then()
	return res
}

// fakeProvider answers CreateRefund with result, after holding each call
// until release is closed (if set); it reports each call's start and how its
// context ended.
type fakeProvider struct {
	result  func(ctx context.Context) domain.RefundResult
	release chan struct{}
	started chan domain.RefundRequest
	mu      sync.Mutex
	calls   int
	ctxErr  error
}

func newFakeProvider(result func(ctx context.Context) domain.RefundResult) *fakeProvider {
	return &fakeProvider{result: result, started: make(chan domain.RefundRequest, 8)}
}

func (p *fakeProvider) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	p.started <- req
	if p.release != nil {
		select {
		case <-p.release:
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	p.ctxErr = ctx.Err()
	p.mu.Unlock()
	return p.result(ctx)
}

func (p *fakeProvider) LookupByReference(context.Context, domain.OperationID) ([]domain.ProviderEffect, error) {
	return nil, errors.New("fake provider: no lookups")
}

func (p *fakeProvider) RetrieveByKey(context.Context, domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	return domain.ProviderEffect{}, false, errors.New("fake provider: no lookups")
}

func (p *fakeProvider) snapshot() (calls int, ctxErr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.ctxErr
}

// handled is Handle's answer from a background run.
type handled struct {
	res worker.Result
	err error
}

// handle runs w.Handle(d) in the background.
func handle(ctx context.Context, w *worker.Worker, d worker.Delivery) <-chan handled {
	done := make(chan handled, 1)
	go func() {
		res, err := w.Handle(ctx, d)
		done <- handled{res, err}
	}()
	return done
}

func (r *rig) wait(done <-chan handled) handled {
	r.t.Helper()
	select {
	case h := <-done:
		return h
	case <-time.After(waitBound):
		r.t.Fatalf("Handle did not return within %s", waitBound)
		return handled{}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger writing from several
// goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
