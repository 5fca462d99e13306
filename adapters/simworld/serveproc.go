package simworld

import (
	"context"
	"errors"
	"time"

	"opledger/adapters/transport"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
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
	index      *recovery.LogIndex
	sweeper    *recovery.Sweeper
	reconciler *recovery.Reconciler
	sweepView  *view
	reconView  *view
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
	now := w.clock.Now()
	sp.nextSweep, sp.nextRecon = now.Add(sweepInterval), now.Add(reconcileInterval)
	indexView := &view{w: w, p: sp.p, name: "serve/index"}
	var err error
	sp.index, err = recovery.NewLogIndex(recovery.LogIndexConfig{Store: indexView, SetAside: w.setAside, Clock: w.clock, Logger: w.log})
	if err != nil {
		panic(err)
	}
	sp.sweepView = &view{w: w, p: sp.p, name: "sweeper"}
	sp.sweeper, err = recovery.NewSweeper(recovery.SweeperConfig{
		Ledger: w.newHandler(sp.sweepView), Index: sp.index, Clock: w.clock, Logger: w.log, SetAside: w.setAside,
	})
	if err != nil {
		panic(err)
	}
	sp.reconView = &view{w: w, p: sp.p, name: "reconciler"}
	n := &network{w: w, p: sp.p, name: "reconciler", current: func() *thread { return sp.reconciling }, sendTimeout: sendTimeout,
		sender: w.unknownUnder}
	shim := &callShim{w: w, p: sp.p, name: "reconciler", client: newClient(w, n), net: n, timeout: func() time.Duration { return reconcilerCallTimeout },
		current: func() *thread { return sp.reconciling }}
	sp.reconciler, err = recovery.NewReconciler(recovery.ReconcilerConfig{
		Ledger: w.newHandler(sp.reconView), Index: sp.index, Provider: shim, Profile: w.profile, Clock: w.clock,
		Logger: w.log, SetAside: w.setAside, CallTimeout: reconcilerCallTimeout,
	})
	if err != nil {
		panic(err)
	}
	for _, c := range []struct {
		name string
		sel  transport.Selector
	}{
		{transport.RelayRefundRequests, transport.SelectRefundRequests},
		{transport.RelaySecuritySignals, transport.SelectSecuritySignals},
	} {
		v := &view{w: w, p: sp.p, name: "relay " + c.name, poll: true}
		r, err := transport.NewRelay(transport.RelayConfig{
			Name: c.name, Store: v, Checkpoints: (*checkpoints)(w), Publisher: w.transport, Select: c.sel,
			Logger: w.log, Clock: w.clock, SetAside: w.setAside,
			Policy:      setaside.Policy{MaxAttempts: 3, Backoff: relayPause, MaxBackoff: relayPause},
			LeaderRetry: relayPause, LeaderCheck: time.Hour, PollMin: relayPause, PollMax: relayPause, FailureBackoff: relayPause,
		})
		if err != nil {
			panic(err)
		}
		sp.relays = append(sp.relays, &relayRole{relay: r, view: v})
	}
	return sp
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
		steps, err := sp.reconciler.ReconcileOnce(ctx)
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
	for _, r := range w.serve.relays {
		if r.relay.Name() == name {
			r.view.saved()
		}
	}
	return nil
}
