package simworld

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"opledger/adapters/provider"
	"opledger/adapters/roles"
	"opledger/adapters/transport"
	"opledger/domain/audit"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// Serve's background roles run at these intervals of the world's clock
// (serve's defaults).
const (
	sweepInterval     = 2 * time.Second
	reconcileInterval = 3 * time.Second
)

// serveProc is `opledger serve`'s background roles: the two relays, the
// sweeper and the reconciler over one log index, each role on its own
// connection to the store.
type serveProc struct {
	w          *World
	p          *process
	relays     []*relayRole
	index      recovery.Index
	sweeper    *recovery.Sweeper
	reconciler *recovery.Reconciler
	sweepView  *view
	reconView  *view
	notices    *noticing // the process's regression recorder
	exportRead int       // the step at which the reconciler read the provider's export in its round (0: not)
	// a pass in progress, and when the next is due
	sweeping, reconciling *thread
	nextSweep, nextRecon  time.Time
}

type relayRole struct {
	relay  *transport.Relay
	view   *view
	thread *thread
}

// relayPause is every pause of the relay: its polls are the scheduler's
// choice (the view's poll gate), so its own timers only yield.
const relayPause = time.Nanosecond

func newServeProc(w *World, incarnation int) *serveProc {
	sp := &serveProc{w: w, p: newProcess(w.ctx, "serve", incarnation)}
	sp.notices = newNoticing(w, sp.p)
	heads := newHeadCache(w, sp.notices) // one store, one head cache, for all of serve's roles
	now := w.clock.Now()
	sp.nextSweep, sp.nextRecon = now.Add(sweepInterval), now.Add(reconcileInterval)
	n := &network{w: w, p: sp.p, name: "reconciler", current: func() *thread { return sp.reconciling }, sendTimeout: sendTimeout,
		sender: w.unknownUnder}
	shim := &callShim{w: w, p: sp.p, name: "reconciler", client: newClient(w, n), net: n, timeout: func() time.Duration { return reconcilerCallTimeout },
		current: func() *thread { return sp.reconciling }}
	exports := newExportClient(w, n)
	views := map[string]*view{}
	built, err := roles.Build(roles.Config{
		Store: w.inner, Clock: w.clock, Logger: w.log, SetAside: w.setAside,
		View: func(name string) eventstore.Store {
			v := &view{w: w, p: sp.p, name: name, poll: strings.HasPrefix(name, roles.Relay+" "), heads: heads}
			if name == roles.Index {
				v.name = "serve/index"
			}
			views[name] = v
			return v
		},
		Ledger: func(store eventstore.Store) (*ledger.Handler, error) {
			return w.newHandler(store.(*view), sp.notices, ""), nil
		},
		Sweeper:    &recovery.SweeperConfig{},
		Reconciler: sp.reconcilerConfig(shim, exports),
		Relays: &transport.RelaysConfig{Checkpoints: (*checkpoints)(w), Publisher: w.transport, Regressions: sp.notices,
			Tune: func(c *transport.RelayConfig) {
				c.Policy = setaside.Policy{MaxAttempts: 3, Backoff: relayPause, MaxBackoff: relayPause}
				c.LeaderRetry, c.LeaderCheck, c.PollMin, c.PollMax, c.FailureBackoff = relayPause, time.Hour, relayPause, relayPause, relayPause
			}},
	})
	if err != nil {
		panic(err) // a constant configuration
	}
	sp.index, sp.sweeper, sp.reconciler = built.Index, built.Sweeper, built.Reconciler
	sp.sweepView, sp.reconView = views[roles.Sweeper], views[roles.Reconciler]
	for _, r := range built.Relays {
		sp.relays = append(sp.relays, &relayRole{relay: r, view: views[roles.Relay+" "+r.Name()]})
	}
	return sp
}

// exportEvery is how often the lost-effect check reads the provider's
// export when no regression prompts it (serve's --provider-export).
const exportEvery = time.Minute

// reconcilerConfig is serve's reconciler: its provider client, the
// export-delivery client, and, in a schedule that may lose commits, the
// provider's export for the lost-effect check (as a serve given
// --provider-export reads it: a file, read whole; no fault touches it).
func (sp *serveProc) reconcilerConfig(shim *callShim, exports *provider.ExportClient) *recovery.ReconcilerConfig {
	w := sp.w
	cfg := &recovery.ReconcilerConfig{Provider: shim, Profile: w.profile, CallTimeout: reconcilerCallTimeout,
		Exports: exports, ExportProfile: exports.Profile()}
	if w.swarm.on(FaultStoreFailoverLossy) {
		cfg.ExportEvery = exportEvery
		cfg.Export = func(context.Context) (audit.ProviderExport, error) {
			if sp.p.dead.Load() {
				return nil, errProcessDead
			}
			var b bytes.Buffer
			if err := w.sim.WriteLedgerExport(&b); err != nil {
				return nil, err
			}
			sp.exportRead = w.step
			w.tracef(sp.p, "reconciler reads the provider's export")
			return provider.ExportReader(w.profile.Name, &b)
		}
	}
	return cfg
}

// newExportClient returns the real export-delivery client over n (the
// simulator serves it beside the provider), its back-off on the world's
// clock, as newClient.
func newExportClient(w *World, n *network) *provider.ExportClient {
	c, err := provider.NewExportClient(provider.Config{
		BaseURL:    "http://provider.sim",
		HTTPClient: &http.Client{Transport: n},
		Timeout:    time.Hour, // the network's timeout, on the world's clock, fires first
		Now:        w.clock.Now,
		After: func(time.Duration) <-chan time.Time {
			return w.s.after(n.current(), "client back-off", w.rng.between(100*time.Millisecond, 5*time.Second), true)
		},
	})
	if err != nil {
		panic(err) // a constant configuration
	}
	return c
}

// start runs the relays: each is a thread parked at its poll.
func (sp *serveProc) start() {
	for _, r := range sp.relays {
		r := r
		sp.w.s.spawn(sp.p, "relay "+r.relay.Name(), func(t *thread) { r.thread, r.view.current = t, t },
			func(ctx context.Context) { _ = r.relay.Run(ctx) })
	}
}

// sweep runs one SweepOnce on a thread of its own.
func (sp *serveProc) sweep() {
	sp.nextSweep = sp.w.clock.Now().Add(sweepInterval)
	sp.w.s.spawn(sp.p, "sweeper", func(t *thread) {
		sp.sweeping, sp.sweepView.current = t, t
		t.onDone = func() { sp.sweeping = nil }
	}, func(ctx context.Context) {
		n, err := sp.sweeper.SweepOnce(ctx)
		sp.w.tracef(sp.p, "sweeper: %d lapsed%s", n, errSuffix(err))
	})
}

// reconcile runs one ReconcileOnce on a thread of its own.
func (sp *serveProc) reconcile() {
	sp.nextRecon = sp.w.clock.Now().Add(reconcileInterval)
	sp.w.s.spawn(sp.p, "reconciler", func(t *thread) {
		sp.reconciling, sp.reconView.current = t, t
		t.onDone = func() { sp.reconciling = nil }
	}, func(ctx context.Context) {
		sp.notices.flush(ctx)
		sp.w.apiNotices.flush(ctx) // the API is serve's: its recorder is flushed by serve's loop too
		sp.exportRead = 0
		steps, err := sp.reconciler.ReconcileOnce(ctx)
		if err == nil && sp.exportRead > 0 && !sp.p.dead.Load() {
			sp.w.exportScannedStep = sp.exportRead
		}
		for _, st := range steps {
			sp.w.tracef(sp.p, "reconciler: %s %s", st.Ref.ExecutionID, st.Verdict)
		}
		if err != nil {
			sp.w.tracef(sp.p, "reconciler: round failed%s", errSuffix(err))
		}
	})
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + errText(err) + ")"
}

// checkpoints is the relays' checkpoint table: it outlives serve restarts,
// and saving it can fail.
type checkpoints World

func (c *checkpoints) Load(ctx context.Context, name string) (string, error) {
	w := (*World)(c)
	if w.serve.p.dead.Load() {
		return "", errProcessDead
	}
	if w.storeDown() {
		// The relay retries at once (its pauses are the world's): it waits
		// here, on the world's clock, as a real one would back off.
		for _, r := range w.serve.relays {
			if r.relay.Name() == name {
				_, _ = w.s.gate(ctx, r.thread, &park{label: "checkpoint unreachable", openable: true,
					readyAt: w.clock.Now().Add(w.rng.between(time.Second, 5*time.Second))})
			}
		}
		return "", errors.New("simulated: checkpoint table unreachable")
	}
	return w.checkpointsSaved[name], nil
}

func (c *checkpoints) Save(_ context.Context, name, position string) error {
	w := (*World)(c)
	if w.serve.p.dead.Load() || w.storeDown() {
		return errors.New("simulated: checkpoint table unreachable")
	}
	if w.inject(w.serve.p, FaultCheckpointFail, "relay %s checkpoint %s", name, position) {
		return errors.New("simulated: checkpoint not saved")
	}
	w.checkpointsSaved[name] = position
	w.cpHistory = append(w.cpHistory, checkpointSave{name: name, position: position, tx: len(w.txLens)})
	for _, r := range w.serve.relays {
		if r.relay.Name() == name {
			r.view.saved()
		}
	}
	return nil
}
