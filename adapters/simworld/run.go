package simworld

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"opledger/domain/simbug"
)

// Liveness bounds: once the faults stop (the settle phase), every operation
// must be terminal (Completed, Denied, Escalated, or NotApplied with its
// agent done) and the world quiet within SettleBound of the world's clock
// and MaxSettleSteps scheduler steps.
const (
	SettleBound    = 30 * time.Minute
	MaxSettleSteps = 20_000
)

// Result is what one schedule did and found.
type Result struct {
	Spec        Spec
	Profile     string
	Workers     int
	Steps       int // chaos and settle
	SettleSteps int
	// Virtual is how long the schedule ran on the world's clock.
	Virtual time.Duration
	// Settled is how long the settle phase took on the world's clock.
	Settled    time.Duration
	Faults     map[Fault]int
	Injections int
	Violations []Violation
	// SecondRefunds are second refunds of an operation inside the
	// provider's key retention after a lossy failover, one of the two
	// escalated to a person: finding 4 of docs/simulation.md, counted
	// rather than failed.
	SecondRefunds []string
	// LossyFailovers is how many store-failover-lossy struck; the final log
	// holds RegressionsRecorded LogRegressed and LostEffectsEscalated
	// LostEffectEscalated events.
	LossyFailovers, RegressionsRecorded, LostEffectsEscalated int
	// HostilePresentations is how many presentations hostile floods
	// made; HolderWritesUnderFlood how many renewals and outcomes the
	// flooded holders wrote meanwhile.
	HostilePresentations, HolderWritesUnderFlood int
	TraceHash                                    string
	Timeline                                     []string
}

// OK reports whether the schedule found nothing.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Run runs one schedule and checks it. A spec that plants a bug needs a
// binary built with -tags simbugs.
func Run(ctx context.Context, spec Spec, opts Options) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	if err := plant(spec.Bug); err != nil {
		return Result{}, err
	}
	defer simbug.Plant("")
	return run(ctx, spec, opts)
}

// plant plants b for the schedules about to run.
func plant(b simbug.Bug) error {
	if b != "" && !simbug.Plant(b) {
		return fmt.Errorf("the schedule plants %s: build with -tags simbugs to plant bugs", b)
	}
	return nil
}

// run runs one schedule, the planted bug (if any) already planted.
func run(ctx context.Context, spec Spec, opts Options) (Result, error) {
	factory := opts.Store
	if factory == nil {
		factory = memoryStore(nil)
	}
	store, dispose, err := factory(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("open the schedule's store: %w", err)
	}
	defer dispose()
	w, err := newWorld(ctx, spec, opts, store)
	if err != nil {
		return Result{}, err
	}
	settleStart, settleStep, quiet := w.loop()
	w.stopAll()
	res := Result{
		Spec: spec, Profile: w.profile.Name, Workers: len(w.workers), Steps: w.step, SettleSteps: w.step - settleStep,
		Virtual: w.clock.Now().Sub(Start), Settled: w.clock.Now().Sub(settleStart),
		Faults: w.injected, Injections: w.injections,
	}
	res.Violations = w.check(quiet)
	res.SecondRefunds = w.secondRefunds
	res.LossyFailovers, res.RegressionsRecorded, res.LostEffectsEscalated = len(w.cuts), w.recordedRegressions, w.escalatedLost
	res.HostilePresentations, res.HolderWritesUnderFlood = w.obs.hostile, w.obs.holderWrites
	for _, v := range res.Violations {
		w.tracef(nil, "VIOLATION %s: %s", v.Check, v.Detail)
	}
	w.digestLog()
	res.TraceHash = hex.EncodeToString(w.trace.Sum(nil))
	res.Timeline = w.lines
	return res, nil
}

// loop runs the chaos phase, then the settle phase until the world is quiet
// or the liveness bound passed. It returns when settling began and whether
// the world became quiet.
func (w *World) loop() (settleStart time.Time, settleStep int, quiet bool) {
	for w.step = 1; ; w.step++ {
		if w.phase == phaseChaos && (w.step > w.spec.Steps && w.allRequested() || w.step > 4*w.spec.Steps+200) {
			w.heal()
			settleStart, settleStep = w.clock.Now(), w.step
		}
		if w.phase == phaseSettle {
			if w.quiet() {
				w.tracef(nil, "quiet")
				return settleStart, settleStep, true
			}
			if w.step-settleStep > MaxSettleSteps || w.clock.Now().Sub(settleStart) > SettleBound {
				w.tracef(nil, "not quiet %s after the faults stopped", fmtOffset(w.clock.Now().Sub(settleStart)))
				return settleStart, settleStep, false
			}
		}
		w.trackOpen()
		w.trackFlood()
		acts := w.actions()
		if len(acts) == 0 {
			w.advance(true)
			continue
		}
		weights := make([]float64, len(acts))
		for i, a := range acts {
			weights[i] = a.weight
		}
		a := acts[w.rng.weighted(weights)]
		if a.name != "" {
			w.tracef(nil, "%s", a.name)
		}
		a.do()
	}
}

func (w *World) allRequested() bool {
	for _, a := range w.agents {
		if !a.requested {
			return false
		}
	}
	return true
}

type action struct {
	name   string
	weight float64
	do     func()
}

// actions lists what may happen now, in an order that depends only on the
// world's state (so the seed's draw picks the same one every run).
func (w *World) actions() []action {
	now := w.clock.Now()
	var acts []action
	add := func(weight float64, do func(), format string, args ...any) {
		acts = append(acts, action{name: fmt.Sprintf(format, args...), weight: weight, do: do})
	}
	for _, t := range w.s.live() {
		t := t
		if t.proc.frozen {
			continue
		}
		if dl := w.dueDeadline(t, now); dl != nil {
			add(8, func() { w.s.fireDeadline(dl) }, "%s: %s", t, dl.label)
			continue // a due deadline fires before the thread does anything else
		}
		pk := t.park
		if pk == nil {
			if t.renewal {
				continue // a lease renewal ending beside its call
			}
			panic(fmt.Sprintf("simworld: thread %s runs while the scheduler chooses (schedule %s, step %d)", t, w.spec, w.step))
		}
		switch pk.kind {
		case parkTimer:
			if !now.Before(pk.due) {
				add(8, func() { w.s.fire(t) }, "%s: %s fires", t, pk.label)
			}
		case parkGate:
			if pk.held {
				add(2, func() { w.sim.Release(); w.s.open(t, wakeGo) }, "provider releases the response held for %s", t)
			}
			if !pk.due.IsZero() && !now.Before(pk.due) {
				add(8, func() { w.s.open(t, wakeTimeout) }, "%s: times out (%s)", t, pk.label)
			}
			if pk.openable && !now.Before(pk.readyAt) && (pk.ready == nil || pk.ready()) {
				weight := 6.0
				if pk.ready != nil {
					weight = 3 // a relay poll
				}
				add(weight, func() { w.s.open(t, wakeGo) }, "%s: %s", t, pk.label)
			}
		}
	}
	var idle []*workerProc
	for _, wp := range w.workers {
		if !wp.p.dead.Load() && !wp.p.frozen && wp.task == nil {
			idle = append(idle, wp)
		}
	}
	if len(idle) > 0 {
		if msgs := w.transport.deliverable(false); len(msgs) > 0 {
			add(6, func() { w.deliver(idle, msgs) }, "")
		}
		if w.phase == phaseChaos && w.swarm.on(FaultMsgReorder) {
			if msgs := w.transport.deliverable(true); len(msgs) > 0 {
				add(2, func() {
					if w.inject(nil, FaultMsgReorder, "deliver out of order") {
						w.deliver(idle, msgs)
					}
				}, "")
			}
		}
	}
	for _, m := range w.transport.redeliverable() {
		m := m
		add(4, func() { w.transport.offerAgain(m, "visibility timeout") }, "")
		break
	}
	sp := w.serve
	if !sp.p.dead.Load() {
		if sp.sweeping == nil && !now.Before(sp.nextSweep) {
			add(5, sp.sweep, "serve: sweep")
		}
		if sp.reconciling == nil && !now.Before(sp.nextRecon) {
			add(5, sp.reconcile, "serve: reconcile")
		}
	} else if !now.Before(w.serveDownUntil) {
		add(5, w.restartServe, "serve restarts")
	}
	for _, a := range w.agents {
		a := a
		if !a.done && !now.Before(a.next) {
			add(4, func() { w.act(a) }, "")
		}
	}
	for i, wp := range w.workers {
		i, wp := i, wp
		switch {
		case wp.p.dead.Load() && !now.Before(w.restartAt[wp]):
			add(5, func() { w.restartWorker(i) }, "%s restarts", wp.id)
		case wp.p.frozen && !now.Before(wp.p.frozenUntil):
			add(5, func() { wp.p.frozen = false }, "%s resumes", wp.id)
		}
	}
	if f := w.flood; f != nil {
		if n := f.due(now) - f.made; n > 0 {
			add(8, func() { w.present(min(n, hostileBatch)) }, "")
		}
	}
	if w.phase == phaseChaos {
		acts = append(acts, w.faultActions()...)
		add(1.5, func() { w.advance(false) }, "")
	}
	return acts
}

func (w *World) dueDeadline(t *thread, now time.Time) *deadline {
	for _, dl := range w.s.deadlines {
		if dl.t == t && !now.Before(dl.at) {
			return dl
		}
	}
	return nil
}

// deliver gives one of msgs to an idle worker.
func (w *World) deliver(idle []*workerProc, msgs []*message) {
	m := msgs[w.rng.intn(len(msgs))]
	wp := idle[w.rng.intn(len(idle))]
	token := w.transport.take(m, wp)
	wp.deliver(m, token)
}

// faultActions are the faults offered as steps of their own.
func (w *World) faultActions() []action {
	var acts []action
	offer := func(f Fault, ok bool, do func(), format string, args ...any) {
		if !ok || !w.swarm.on(f) {
			return
		}
		acts = append(acts, action{weight: w.swarm.weight[f], do: func() {
			if w.inject(nil, f, format, args...) {
				do()
			}
		}})
	}
	var alive, unfrozen []int
	for i, wp := range w.workers {
		if !wp.p.dead.Load() {
			alive = append(alive, i)
			if !wp.p.frozen {
				unfrozen = append(unfrozen, i)
			}
		}
	}
	if len(alive) > 0 {
		i := alive[w.step%len(alive)]
		offer(FaultWorkerCrash, true, func() { w.crashWorker(i) }, "%s dies", w.workers[i].id)
	}
	if len(unfrozen) > 0 {
		i := unfrozen[w.step%len(unfrozen)]
		offer(FaultWorkerFreeze, true, func() { w.freezeWorker(i) }, "%s stops", w.workers[i].id)
	}
	offer(FaultServeRestart, !w.serve.p.dead.Load(), w.crashServe, "serve dies")
	offer(FaultClockJump, true, func() {
		d := clockJump(w.rng)
		w.clock.Advance(d)
		w.tracef(nil, "the clock leaps %s", d)
	}, "clock leaps")
	offer(FaultStoreOutage, !w.storeDown(), func() {
		w.downUntil = w.clock.Now().Add(w.rng.between(time.Second, 2*time.Minute))
		w.tracef(nil, "store down until %s", fmtOffset(w.downUntil.Sub(Start)))
	}, "store outage")
	offer(FaultStoreFailover, true, func() { w.failover(false) }, "failover to a synchronous standby")
	offer(FaultStoreFailoverLossy, w.canLose(), func() { w.failover(true) }, "failover to an asynchronous standby")
	offer(FaultMsgMalformed, true, func() { w.transport.malformed(false) }, "hostile message")
	offer(FaultMsgUnreadable, true, func() { w.transport.malformed(true) }, "unreadable message")
	offer(FaultMsgReplay, w.transport.handled > 0, func() { w.transport.replay() }, "operator copies an old message")
	offer(FaultDLQResubmit, w.hasDeadLetters(), func() { w.transport.resubmit() }, "operator resubmits dead letters")
	inflight := w.transport.inFlight()
	offer(FaultMsgRedeliver, len(inflight) > 0, func() {
		w.transport.offerAgain(inflight[w.rng.intn(len(inflight))], "redelivered while in flight")
	}, "redeliver a message in flight")
	offer(FaultAgentForgedWrite, len(w.obs.claimed) > 0, func() { w.forge() }, "forged executor write")
	if w.flood == nil && w.swarm.on(FaultHostileFlood) {
		if holders := w.holding(); len(holders) > 0 {
			offer(FaultHostileFlood, true, func() { w.startFlood(holders) }, "hostile flood")
		}
	}
	return acts
}

func (w *World) hasDeadLetters() bool {
	for _, m := range w.transport.msgs {
		if m.state == msgDead && !m.resubmitted && !m.resubmission {
			return true
		}
	}
	return false
}

// advance moves the world's clock to the next moment something is due, or
// (in the chaos phase, now and then) a little past it.
func (w *World) advance(needed bool) {
	now := w.clock.Now()
	next, ok := w.nextDue(now)
	var d time.Duration
	switch {
	case ok && (needed || w.rng.chance(0.7)):
		d = next.Sub(now)
	case needed:
		d = sweepInterval
	default:
		d = w.rng.between(10*time.Millisecond, 5*time.Second)
	}
	if d <= 0 {
		d = time.Millisecond
	}
	w.clock.Advance(d)
}

// nextDue is the earliest future moment at which something becomes due.
func (w *World) nextDue(now time.Time) (time.Time, bool) {
	var best time.Time
	consider := func(t time.Time) {
		if t.After(now) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for _, t := range w.s.live() {
		if pk := t.park; pk != nil {
			consider(pk.due)
			consider(pk.readyAt)
		}
	}
	for _, dl := range w.s.deadlines {
		consider(dl.at)
	}
	if !w.serve.p.dead.Load() {
		consider(w.serve.nextSweep)
		consider(w.serve.nextRecon)
	} else {
		consider(w.serveDownUntil)
	}
	for _, a := range w.agents {
		if !a.done {
			consider(a.next)
		}
	}
	for _, wp := range w.workers {
		if wp.p.dead.Load() {
			consider(w.restartAt[wp])
		} else if wp.p.frozen {
			consider(wp.p.frozenUntil)
		}
	}
	for _, m := range w.transport.msgs {
		switch m.state {
		case msgReady:
			consider(m.notBefore)
		case msgInFlight:
			consider(m.since.Add(visibilityTimeout))
		}
	}
	consider(w.downUntil)
	if w.flood != nil {
		consider(w.flood.next())
	}
	return best, !best.IsZero()
}

func (w *World) crashWorker(i int) {
	wp := w.workers[i]
	w.s.kill(wp.p)
	w.restartAt[wp] = w.clock.Now().Add(w.rng.between(0, 30*time.Second))
	w.tracef(nil, "%s died", wp.id)
}

func (w *World) restartWorker(i int) {
	old := w.workers[i]
	delete(w.restartAt, old)
	w.workers[i] = newWorkerProc(w, old.id, old.p.incarnation+1)
}

func (w *World) freezeWorker(i int) {
	wp := w.workers[i]
	wp.p.frozen = true
	d := w.rng.between(time.Second, 3*leaseDuration)
	wp.p.frozenUntil = w.clock.Now().Add(d)
	w.tracef(nil, "%s stopped for %s", wp.id, d)
}

func (w *World) crashServe() {
	w.s.kill(w.serve.p)
	w.serveDownUntil = w.clock.Now().Add(w.rng.between(0, 20*time.Second))
	w.tracef(nil, "serve died")
}

func (w *World) restartServe() {
	w.serve = newServeProc(w, w.serve.p.incarnation+1)
	w.serve.start()
}

// heal ends the chaos: no fault strikes from now on, the store is up, every
// process runs, the operator releases what the loops set aside and
// resubmits the dead letters.
func (w *World) heal() {
	w.phase = phaseSettle
	w.tracef(nil, "faults stop: settling")
	w.stopFlood()
	w.downUntil = time.Time{}
	for i, wp := range w.workers {
		if wp.p.dead.Load() {
			w.restartWorker(i)
		}
		wp.p.frozen = false
	}
	if w.serve.p.dead.Load() {
		w.restartServe()
	}
	// The store is back for good: what the recorders could not write yet
	// is written now (serve's and a worker's flush loops would).
	w.apiNotices.flush(w.ctx)
	w.serve.notices.flush(w.ctx)
	for _, wp := range w.workers {
		wp.notices.flush(w.ctx)
	}
	if w.hostileNotices != nil {
		w.hostileNotices.flush(w.ctx)
	}
	w.releaseSetAside()
	if n := w.transport.resubmit(); n > 0 {
		w.tracef(nil, "operator resubmitted %d dead letters", n)
	}
}

// releaseSetAside is the operator releasing every item the loops set aside.
func (w *World) releaseSetAside() {
	items, err := w.setAside.List(w.ctx, setAsideQuery)
	if err != nil {
		return
	}
	for _, it := range items {
		_ = w.setAside.Clear(w.ctx, it.Role, it.Item)
		w.tracef(nil, "operator releases %s %s", it.Role, it.Item)
	}
}

// quiet: every agent is done, nothing is in flight, the relays have read
// everything, and no thread but the relays' polls is alive.
func (w *World) quiet() bool {
	if !w.lossyQuiet() {
		return false
	}
	for _, a := range w.agents {
		if !a.done {
			return false
		}
	}
	if w.transport.busy() || !w.relaysCaughtUp() {
		return false
	}
	for _, t := range w.s.live() {
		if pk := t.park; pk == nil || pk.ready == nil {
			return false
		}
	}
	return true
}

// stopAll kills every process, so that no goroutine of the schedule outlives
// it.
func (w *World) stopAll() {
	for _, wp := range w.workers {
		if !wp.p.dead.Load() {
			w.s.kill(wp.p)
		}
	}
	if !w.serve.p.dead.Load() {
		w.s.kill(w.serve.p)
	}
	w.apiProc.cancel()
	w.sim.Close()
}
