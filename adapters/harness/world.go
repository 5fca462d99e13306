// Package harness is a composition root, not an adapter: it wires
// opledger's roles to real adapters for end-to-end scenarios — the command
// handler on a given event store, the provider client talking HTTP to the
// provider simulator, workers, the sweeper and the reconciler, all on one
// clock that also drives the simulator's — and holds the demo's script (the
// refund story, the export story) with its test doubles (CrashAfterClaim).
// `opledger demo` links it into the binary; the scenario tests here, the
// console's and the transport's tests (transporttest) use it. It lives
// beside the adapters, whose tests import it, so that nothing below cmd
// imports cmd; serve's roles come from adapters/roles, as serve's do. It
// holds no logic of its own beyond wiring and the stories' steps.
package harness

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"time"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/adapters/roles"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/domain/worker"
	"opledger/eventstore"
)

// Options configures a World. Zero values take defaults.
type Options struct {
	Store eventstore.Store // required
	// Profile is the provider's (default provider.StripeV1): the client
	// speaks its API, the simulator models it, the reconciler decides from
	// its capabilities.
	Profile domain.ProviderProfile
	// Start is the clock's reading at New (default: Thursday 14:02:10 UTC of
	// the seed story).
	Start time.Time
	// Index finds sweeper and reconciler candidates (default: a LogIndex).
	Index recovery.Index
	// SetAside keeps the roles' failing items (default: a setaside.Memory).
	SetAside setaside.Store
	// ClientAttempts bounds the provider client's sends per call (default 3).
	ClientAttempts int
	// ProviderURL, when set, uses that provider instead of starting a
	// simulator in process (Sim is then nil).
	ProviderURL string
	Logger      *slog.Logger
}

// SeedStart is the seed story's first moment: Thursday 14:02:10 UTC.
var SeedStart = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// World is one running refund system.
type World struct {
	Clock    *clock.Manual
	Store    eventstore.Store
	Ledger   *ledger.Handler
	Sim      *sim.Simulator
	SimURL   string
	Provider *provider.Client
	// Exports is the export-delivery service's client (the simulator serves
	// it beside the provider), the executor of export downloads.
	Exports    *provider.ExportClient
	Index      recovery.Index
	SetAside   setaside.Store
	Sweeper    *recovery.Sweeper
	Reconciler *recovery.Reconciler
	Profile    domain.ProviderProfile
	// WorkerTimers drive lease renewals of workers made by Worker;
	// ClientTimers drive the provider client's back-off. Nothing fires them
	// but the caller.
	WorkerTimers *Timers
	ClientTimers *Timers
	Logger       *slog.Logger

	server *httptest.Server
}

// New builds a world. Close it when done.
func New(opts Options) (*World, error) {
	if opts.Store == nil {
		return nil, fmt.Errorf("harness: Store is required")
	}
	if opts.Profile.Name == "" {
		opts.Profile = provider.StripeV1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &World{
		Clock: clock.NewManual(cmp.Or(opts.Start, SeedStart)), Store: opts.Store, Profile: opts.Profile,
		WorkerTimers: NewTimers(), ClientTimers: NewTimers(), Logger: opts.Logger,
	}
	var err error
	// Its callers are in process and one at a time: a refusal past the
	// evidence bound waits a millisecond for its summary, not SummaryEvery.
	w.Ledger, err = ledger.New(ledger.Config{Store: opts.Store, Clock: w.Clock, Logger: opts.Logger, SummaryEvery: time.Millisecond})
	if err != nil {
		return nil, err
	}
	w.SimURL = opts.ProviderURL
	if w.SimURL == "" {
		simCfg, err := sim.ConfigFor(opts.Profile)
		if err != nil {
			return nil, err
		}
		simCfg.Clock, simCfg.Logger = w.Clock.Now, opts.Logger
		w.Sim, err = sim.New(simCfg)
		if err != nil {
			return nil, err
		}
		w.server = httptest.NewServer(w.Sim)
		w.SimURL = w.server.URL
	}
	w.Provider, err = provider.New(provider.Config{
		Profile: opts.Profile, BaseURL: w.SimURL, MaxAttempts: cmp.Or(opts.ClientAttempts, 3), Timeout: 10 * time.Second,
		After: w.ClientTimers.After, Logger: opts.Logger,
	})
	if err != nil {
		w.Close()
		return nil, err
	}
	w.Exports, err = provider.NewExportClient(provider.Config{
		BaseURL: w.SimURL, MaxAttempts: cmp.Or(opts.ClientAttempts, 3), Timeout: 10 * time.Second,
		After: w.ClientTimers.After, Logger: opts.Logger,
	})
	if err != nil {
		w.Close()
		return nil, err
	}
	w.SetAside = opts.SetAside
	if w.SetAside == nil {
		w.SetAside = &setaside.Memory{}
	}
	built, err := roles.Build(roles.Config{
		Store: opts.Store, Ledger: func(eventstore.Store) (*ledger.Handler, error) { return w.Ledger, nil },
		Clock: w.Clock, Logger: opts.Logger, SetAside: w.SetAside, Index: opts.Index,
		Sweeper: &recovery.SweeperConfig{},
		Reconciler: &recovery.ReconcilerConfig{Provider: w.Provider, Profile: opts.Profile,
			Exports: w.Exports, ExportProfile: w.Exports.Profile()},
	})
	if err != nil {
		w.Close()
		return nil, err
	}
	w.Index, w.Sweeper, w.Reconciler = built.Index, built.Sweeper, built.Reconciler
	return w, nil
}

// Close stops the in-process simulator.
func (w *World) Close() {
	if w.server != nil {
		w.server.Close()
	}
	if w.Sim != nil {
		w.Sim.Close()
	}
}

// Worker returns a worker named id on this world's ledger, provider and
// export-delivery service, its lease renewals driven by WorkerTimers.
func (w *World) Worker(id string) (*worker.Worker, error) {
	return w.WorkerOn(id, w.Ledger)
}

// WorkerOn is Worker writing through lg (CrashAfterClaim: a process that
// dies after its claim).
func (w *World) WorkerOn(id string, lg worker.Ledger) (*worker.Worker, error) {
	return worker.New(worker.Config{
		ID: id, Ledger: lg, Provider: w.Provider, Exports: w.Exports, Clock: w.Clock, Logger: w.Logger,
		After: w.WorkerTimers.After,
	})
}

// Refund names one approved operation, a refund or an export download: its
// operation and the capability issued.
type Refund struct {
	Operation  domain.OperationID
	Capability domain.CapabilityID
	Decision   domain.Decided
}

// Approve requests operation op (amount in minor units, EUR, on an order
// whose total is twice the amount), decides it Allowed under the profile's
// key policy and issues a capability: the refund API's part of the story.
func (w *World) Approve(ctx context.Context, op domain.OperationID, order string, amountMinor int64) (Refund, error) {
	_, err := w.Ledger.RequestOperation(ctx, domain.RequestOperation{
		OperationID: op, OrderID: order, AmountMinor: amountMinor, Currency: "EUR",
		OrderTotalMinor: 2 * amountMinor, CorrelationID: domain.CorrelationID("COR-" + string(op)), RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	if err != nil {
		return Refund{}, err
	}
	return w.Reauthorize(ctx, op, domain.Facts{OrderRefundable: true})
}

// Reauthorize decides op's next attempt on facts and, when Allowed, issues a
// capability for it. A Denied decision returns Refund with no capability.
func (w *World) Reauthorize(ctx context.Context, op domain.OperationID, facts domain.Facts) (Refund, error) {
	d, _, err := w.Ledger.Decide(ctx, op, domain.Decide{
		Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: facts, KeyPolicy: w.Profile.KeyPolicy,
	}, ledger.Cause{Actor: "agent-7"})
	if err != nil || d.Verdict != domain.Allowed {
		return Refund{Operation: op, Decision: d}, err
	}
	c, err := w.IssueCapability(ctx, op)
	return Refund{Operation: op, Capability: c, Decision: d}, err
}

// ApproveDownloads requests an export download of export (operation op),
// decides uses downloads Allowed and issues their capability: the export
// API's part of the second story.
func (w *World) ApproveDownloads(ctx context.Context, op domain.OperationID, export string, uses int) (Refund, error) {
	_, err := w.Ledger.RequestOperation(ctx, domain.RequestOperation{
		OperationID: op, Kind: domain.KindExportDownload, ExportID: export,
		CorrelationID: domain.CorrelationID("COR-" + string(op)), RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	if err != nil {
		return Refund{}, err
	}
	d, c, err := w.Ledger.DecideAndIssue(ctx, op, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: uses},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	return Refund{Operation: op, Capability: c.CapabilityID, Decision: d}, err
}

// IssueCapability issues another capability under op's latest decision.
func (w *World) IssueCapability(ctx context.Context, op domain.OperationID) (domain.CapabilityID, error) {
	c, err := w.Ledger.IssueCapability(ctx, op, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	return c.CapabilityID, err
}

// Delivery builds the message that carries refund r.
func (r Refund) Delivery(msg domain.MessageID) worker.Delivery {
	return worker.Delivery{
		MessageID: msg, CorrelationID: domain.CorrelationID("COR-" + string(r.Operation)),
		OperationID: r.Operation, CapabilityID: r.Capability,
	}
}

// State loads op from its stream.
func (w *World) State(ctx context.Context, op domain.OperationID) (*domain.Operation, error) {
	return w.Ledger.Load(ctx, op)
}

// Evidence returns op's refused presentations recorded one by one: in its
// evidence stream, and in its stream (as earlier builds recorded them).
func (w *World) Evidence(ctx context.Context, op domain.OperationID) ([]domain.PresentationRejected, error) {
	var events []eventstore.RecordedEvent
	for _, stream := range []string{op.StreamName(), domain.EvidenceStreamOf(op)} {
		page, err := w.Store.ReadStream(ctx, stream, 0, 100_000)
		if err != nil {
			return nil, err
		}
		events = append(events, page...)
	}
	var out []domain.PresentationRejected
	for _, rec := range events {
		if rec.Type != domain.TypePresentationRejected {
			continue
		}
		dec, err := codec.DecodeRecorded(rec)
		if err != nil {
			return nil, err
		}
		e := dec.Event
		out = append(out, e.(domain.PresentationRejected))
	}
	return out, nil
}
