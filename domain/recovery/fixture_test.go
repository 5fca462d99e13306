package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// The roles on their own: the in-memory event store, the real command
// handler, the in-memory log index and set-aside store, and the provider
// simulator in process (its own ledger says what it received and created).
// One manual clock drives the ledger, the roles' backoffs and the
// simulator; nothing waits on real time.

var start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// testPolicy sets an item aside after three failures, 1s, 2s apart.
var testPolicy = setaside.Policy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 4 * time.Second}

type fixture struct {
	t       *testing.T
	ctx     context.Context
	clock   *clock.Manual
	store   *faultyStore
	h       *ledger.Handler
	failing *setaside.Memory
	index   *recovery.LogIndex
	profile domain.ProviderProfile
	sim     *sim.Simulator
	client  *provider.Client
	seen    *observed
	log     *slog.Logger
	// secrets holds the lease secret each claim handed out.
	secrets map[domain.ExecutionID]string
}

type fixtureOptions struct {
	profile domain.ProviderProfile
	// maxStreamEvents bounds the handler's loads (0: its default).
	maxStreamEvents int
}

func newFixture(t *testing.T, o fixtureOptions) *fixture {
	t.Helper()
	if o.profile.Name == "" {
		o.profile = provider.StripeV1
	}
	f := &fixture{t: t, ctx: t.Context(), clock: clock.NewManual(start), failing: &setaside.Memory{}, profile: o.profile,
		seen: &observed{}, secrets: map[domain.ExecutionID]string{}, log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	f.store = &faultyStore{Store: memory.New(f.clock.Now), down: map[string]bool{}}
	var err error
	f.h, err = ledger.New(ledger.Config{Store: f.store, Clock: f.clock, Logger: f.log, MaxStreamEvents: o.maxStreamEvents,
		ReadPage: 10, MaxAppendRetries: 1, AppendRetryBackoff: time.Millisecond})
	require.NoError(t, err)
	f.index, err = recovery.NewLogIndex(recovery.LogIndexConfig{Store: f.store, SetAside: f.failing, Policy: testPolicy,
		Clock: f.clock, Logger: f.log, OnItemFailure: f.seen.observe})
	require.NoError(t, err)
	simCfg, err := sim.ConfigFor(o.profile)
	require.NoError(t, err)
	simCfg.Clock, simCfg.Logger = f.clock.Now, f.log
	f.sim, err = sim.New(simCfg)
	require.NoError(t, err)
	srv := httptest.NewServer(f.sim)
	t.Cleanup(func() { srv.Close(); f.sim.Close() })
	f.client, err = provider.New(provider.Config{Profile: o.profile, BaseURL: srv.URL, MaxAttempts: 1, Timeout: 10 * time.Second, Logger: f.log})
	require.NoError(t, err)
	return f
}

func (f *fixture) sweeper(tune func(*recovery.SweeperConfig)) *recovery.Sweeper {
	f.t.Helper()
	cfg := recovery.SweeperConfig{Ledger: f.h, Index: f.index, Logger: f.log, SetAside: f.failing, Policy: testPolicy,
		OnItemFailure: f.seen.observe}
	if tune != nil {
		tune(&cfg)
	}
	s, err := recovery.NewSweeper(cfg)
	require.NoError(f.t, err)
	return s
}

func (f *fixture) reconciler(tune func(*recovery.ReconcilerConfig)) *recovery.Reconciler {
	f.t.Helper()
	cfg := recovery.ReconcilerConfig{Ledger: f.h, Index: f.index, Provider: f.client, Profile: f.profile, Logger: f.log,
		SetAside: f.failing, Policy: testPolicy, OnItemFailure: f.seen.observe, MaxInconclusive: 3}
	if tune != nil {
		tune(&cfg)
	}
	r, err := recovery.NewReconciler(cfg)
	require.NoError(f.t, err)
	return r
}

// approve requests op, decides it Allowed under the profile's key policy
// and issues a capability.
func (f *fixture) approve(op domain.OperationID) domain.CapabilityID {
	f.t.Helper()
	_, err := f.h.RequestOperation(f.ctx, domain.RequestOperation{
		OperationID: op, OrderID: "ORD-" + string(op), AmountMinor: 12_000, Currency: "EUR", OrderTotalMinor: 24_000,
		CorrelationID: domain.CorrelationID("COR-" + string(op)), RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	d, _, err := f.h.Decide(f.ctx, op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000,
		Facts: domain.Facts{OrderRefundable: true}, KeyPolicy: f.profile.KeyPolicy}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	require.Equal(f.t, domain.Allowed, d.Verdict)
	c, err := f.h.IssueCapability(f.ctx, op, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	require.NoError(f.t, err)
	return c.CapabilityID
}

// executing approves op and claims it: an Executing execution under a
// lease of domain.DefaultLeaseDuration from now.
func (f *fixture) executing(op domain.OperationID) *domain.Claimed {
	f.t.Helper()
	c := f.approve(op)
	out, err := f.h.Claim(f.ctx, op, domain.Claim{MessageID: domain.MessageID("MSG-" + string(op)), CapabilityID: c,
		WorkerID: "worker-a", CorrelationID: domain.CorrelationID("COR-" + string(op))})
	require.NoError(f.t, err)
	require.Equal(f.t, domain.StatusClaimed, out.Status, "claim of %s: %s", op, out.Reason)
	f.secrets[out.ExecutionID] = out.LeaseSecret
	return out.Claimed
}

// expire moves the clock past every lease taken so far.
func (f *fixture) expire() { f.clock.Advance(domain.DefaultLeaseDuration + time.Second) }

// lapse makes x Unknown, as the sweeper would.
func (f *fixture) lapse(op domain.OperationID, x domain.ExecutionID) {
	f.t.Helper()
	_, err := f.h.LapseLease(f.ctx, op, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(f.t, err)
}

// unknown claims each op, lets every lease lapse, and returns the claims.
func (f *fixture) unknown(ops ...domain.OperationID) map[domain.OperationID]*domain.Claimed {
	f.t.Helper()
	claims := map[domain.OperationID]*domain.Claimed{}
	for _, op := range ops {
		claims[op] = f.executing(op)
	}
	f.expire()
	for _, op := range ops {
		f.lapse(op, claims[op].ExecutionID)
	}
	return claims
}

// appendRaw writes an event straight into the store, past the handler: how
// a bug or tampering leaves a stream the handler cannot load.
func (f *fixture) appendRaw(op domain.OperationID, e domain.Event) {
	f.t.Helper()
	d, err := codec.EncodeEvent(uuid.NewString(), e, domain.Metadata{Actor: "tamperer", RecordedAt: f.clock.Now()})
	require.NoError(f.t, err)
	_, err = f.store.Append(f.ctx, op.StreamName(), eventstore.Any(), []eventstore.EventData{d})
	require.NoError(f.t, err)
}

// corrupt appends an outcome for an execution op never had: the stream
// decodes but cannot be folded (ledger.ErrCorruptStream).
func (f *fixture) corrupt(op domain.OperationID) {
	f.t.Helper()
	f.appendRaw(op, domain.OutcomeRecorded{ExecutionID: domain.ExecutionID("EXE-" + string(op)[3:] + ".99"), LeaseEpoch: 1,
		Outcome: domain.Completed, RecordedAt: f.clock.Now()})
}

// overLong appends n duplicate deliveries: a stream longer than the
// handler loads.
func (f *fixture) overLong(op domain.OperationID, n int) {
	f.t.Helper()
	for i := range n {
		f.appendRaw(op, domain.DeliveryDuplicated{MessageID: domain.MessageID(fmt.Sprintf("MSG-DUP-%d", i)), SeenAt: f.clock.Now()})
	}
}

func (f *fixture) state(op domain.OperationID) *domain.Operation {
	f.t.Helper()
	s, err := f.h.Load(f.ctx, op)
	require.NoError(f.t, err)
	return s
}

func (f *fixture) execution(op domain.OperationID, x domain.ExecutionID) *domain.Execution {
	f.t.Helper()
	e := f.state(op).Execution(x)
	require.NotNil(f.t, e, "execution %s", x)
	return e
}

// item returns role's entry for item in the set-aside store.
func (f *fixture) item(role setaside.Role, item string) (setaside.Item, bool) {
	f.t.Helper()
	it, ok, err := f.failing.Get(f.ctx, role, item)
	require.NoError(f.t, err)
	return it, ok
}

// setAside lists role's set-aside items.
func (f *fixture) setAside(role setaside.Role) []setaside.Item {
	f.t.Helper()
	items, err := f.failing.List(f.ctx, setaside.Query{Role: role, SetAsideOnly: true})
	require.NoError(f.t, err)
	return items
}

// simCounters returns what the simulator counted for op.
func (f *fixture) simCounters(op domain.OperationID) sim.Counters {
	return f.sim.Ledger().ByOperation[string(op)]
}

// simRequests returns the creation requests the simulator received for op.
func (f *fixture) simRequests(op domain.OperationID) []sim.ReceivedRequest {
	var out []sim.ReceivedRequest
	for _, r := range f.sim.Ledger().Requests {
		if r.OperationID == string(op) {
			out = append(out, r)
		}
	}
	return out
}

// events decodes op's stream.
func (f *fixture) events(op domain.OperationID) []domain.Event {
	f.t.Helper()
	recs, err := f.store.ReadStream(f.ctx, op.StreamName(), 0, 10_000)
	require.NoError(f.t, err)
	out := make([]domain.Event, 0, len(recs))
	for _, rec := range recs {
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(f.t, err)
		e := dec.Event
		out = append(out, e)
	}
	return out
}

// observed collects what OnItemFailure reports.
type observed struct {
	mu    sync.Mutex
	items []setaside.Item
}

func (o *observed) observe(it setaside.Item) {
	o.mu.Lock()
	o.items = append(o.items, it)
	o.mu.Unlock()
}

func (o *observed) of(role setaside.Role, item string) []setaside.Item {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []setaside.Item
	for _, it := range o.items {
		if it.Role == role && it.Item == item {
			out = append(out, it)
		}
	}
	return out
}

// faultyStore is the memory store with injectable outages: reading a
// stream marked down (or every stream, with all) fails as an unreachable
// store does.
type faultyStore struct {
	eventstore.Store
	mu   sync.Mutex
	down map[string]bool
	all  bool
}

func (s *faultyStore) setDown(stream string, down bool) {
	s.mu.Lock()
	s.down[stream] = down
	s.mu.Unlock()
}

func (s *faultyStore) setAllDown(down bool) {
	s.mu.Lock()
	s.all = down
	s.mu.Unlock()
}

func (s *faultyStore) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	s.mu.Lock()
	down := s.all || s.down[stream]
	s.mu.Unlock()
	if down {
		return nil, eventstore.Unavailable("read "+stream, errors.New("injected: connection refused"))
	}
	return s.Store.ReadStream(ctx, stream, from, limit)
}

// Append fails as ReadStream does: a stream that cannot be read cannot be
// written either (the handler may decide on a cached state without
// reading).
func (s *faultyStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	s.mu.Lock()
	down := s.all || s.down[stream]
	s.mu.Unlock()
	if down {
		return eventstore.AppendResult{}, eventstore.Unavailable("append "+stream, errors.New("injected: connection refused"))
	}
	return s.Store.Append(ctx, stream, expected, events)
}

// provider wrappers: the simulator answers every call; these change what
// the reconciler hears from a read.

// laggingLookup is a provider whose search has not caught up: it finds
// nothing (Stripe's search is eventually consistent), while creation goes
// to the simulator.
type laggingLookup struct{ domain.Provider }

func (laggingLookup) LookupByReference(context.Context, domain.OperationID) ([]domain.ProviderEffect, error) {
	return nil, nil
}

// failingLookup is a provider whose reads keep failing with text.
type failingLookup struct {
	domain.Provider
	text string
}

func (p failingLookup) LookupByReference(context.Context, domain.OperationID) ([]domain.ProviderEffect, error) {
	return nil, errors.New(p.text)
}

func (p failingLookup) RetrieveByKey(context.Context, domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	return domain.ProviderEffect{}, false, errors.New(p.text)
}

// fixedLookup answers every lookup with effects.
type fixedLookup struct {
	domain.Provider
	effects []domain.ProviderEffect
}

func (p fixedLookup) LookupByReference(context.Context, domain.OperationID) ([]domain.ProviderEffect, error) {
	return p.effects, nil
}

// fixedRetrieve answers every retrieve by key with effect (none when nil).
type fixedRetrieve struct {
	domain.Provider
	effect *domain.ProviderEffect
}

func (p fixedRetrieve) RetrieveByKey(context.Context, domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	if p.effect == nil {
		return domain.ProviderEffect{}, false, nil
	}
	return *p.effect, true, nil
}

// exports returns a client of the simulator's export-delivery service.
func (f *fixture) exports() *provider.ExportClient {
	f.t.Helper()
	srv := httptest.NewServer(f.sim)
	f.t.Cleanup(srv.Close)
	x, err := provider.NewExportClient(provider.Config{BaseURL: srv.URL, MaxAttempts: 1, Timeout: 10 * time.Second, Logger: f.log})
	require.NoError(f.t, err)
	return x
}

// downloads requests an export download of uses uses and issues its
// capability.
func (f *fixture) downloads(op domain.OperationID, uses int) domain.CapabilityID {
	f.t.Helper()
	_, err := f.h.RequestOperation(f.ctx, domain.RequestOperation{OperationID: op, Kind: domain.KindExportDownload,
		ExportID: "EXP-" + string(op), CorrelationID: domain.CorrelationID("COR-" + string(op))}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	_, c, err := f.h.DecideAndIssue(f.ctx, op, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: uses},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	require.NoError(f.t, err)
	return c.CapabilityID
}

func (f *fixture) record(op domain.OperationID, c *domain.Claimed, r domain.EffectResult) {
	f.t.Helper()
	require.NoError(f.t, f.h.RecordOutcome(f.ctx, op, domain.RecordOutcome{ExecutionID: c.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: f.secrets[c.ExecutionID], Outcome: r.Outcome, ProviderReference: r.ProviderReference}, ledger.Cause{Actor: "worker-a"}))
}
