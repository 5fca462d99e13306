package simworld

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"strings"
	"time"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// Start is the world's clock at the start of every schedule.
var Start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// StoreFactory opens a fresh, empty event store for one schedule and returns
// how to dispose of it. Nil means the memory store.
type StoreFactory func(ctx context.Context) (eventstore.Store, func(), error)

// Options shape how a schedule runs (not what it draws: that is the Spec).
type Options struct {
	Store StoreFactory
	// Timeline keeps the trace's lines (for a readable timeline); without it
	// only their hash is kept.
	Timeline bool
	// Logger receives the roles' logs (default: discarded).
	Logger *slog.Logger
	// hostileEvidenceOnOpStream plants a defect for the tests: the hostile
	// caller's evidence is appended to the operation's stream, not beside
	// it, where it moves the version the holder appends at.
	hostileEvidenceOnOpStream bool
}

// World is one schedule's simulated world.
type World struct {
	spec Spec
	opts Options
	ctx  context.Context

	clock *clock.Manual
	rng   *rng
	s     *sched
	log   *slog.Logger
	step  int
	phase phase
	swarm swarm

	trace      hash.Hash
	lines      []string
	injections int
	injected   map[Fault]int

	inner     eventstore.Store
	appends   int64
	downUntil time.Time
	ids       int

	sim     *sim.Simulator
	profile domain.ProviderProfile
	keys    map[string]bool // idempotency keys sent to the provider
	posts   int             // creation requests delivered to the provider
	sentFor map[int64]domain.ExecutionID

	apiProc          *process
	api              *ledger.Handler
	serve            *serveProc
	serveDownUntil   time.Time
	workers          []*workerProc
	restartAt        map[*workerProc]time.Time
	transport        *simTransport
	agents           []*agent
	setAside         *setaside.Memory
	checkpointsSaved map[string]string

	// failovers (failover.go)
	failovers int   // every failover so far: a call in flight across one is reset
	txLens    []int // the log's length after each transaction (a store that can lose them)
	cpHistory []checkpointSave
	cuts      []cut
	lostKeys  map[keyOf]bool
	lostExecs map[domain.ExecutionID]bool
	open      bool  // an execution was open at the last look (lossyQuiet)
	openAt    int64 // w.appends+1 at that look (0: none yet)
	// what the final log holds of the failovers: LogRegressed and
	// LostEffectEscalated events
	recordedRegressions, escalatedLost int
	secondRefunds                      []string        // second refunds inside the key retention after a lossy failover, one escalated (finding 4)
	exportScannedStep                  int             // the step at which the reconciler read the provider's export in its last round that checked it whole
	lastOpenStep                       int             // the last step the settle phase saw an execution open, after a lossy failover
	apiNotices                         *noticing       // the API process's regression recorder
	oracle                             *ledger.Handler // reads the store directly, no cache: the world's own look

	// hostile floods (hostile.go): the one on (nil: none), how many
	// began, and the process and handler the hostile caller presents
	// through (made at the first)
	flood          *flood
	floods         int
	hostile        *process
	hostileLedger  *ledger.Handler
	hostileNotices *noticing

	obs observations
}

type phase int

const (
	phaseChaos phase = iota
	phaseSettle
)

// newWorld builds the world of spec on store.
func newWorld(ctx context.Context, spec Spec, opts Options, store eventstore.Store) (*World, error) {
	w := &World{
		spec: spec, opts: opts, ctx: ctx,
		clock: clock.NewManual(Start), rng: newRNG(spec.Seed), log: opts.Logger,
		trace: sha256.New(), injected: map[Fault]int{}, inner: store, keys: map[string]bool{}, sentFor: map[int64]domain.ExecutionID{},
		restartAt: map[*workerProc]time.Time{}, setAside: &setaside.Memory{}, checkpointsSaved: map[string]string{},
		lostKeys: map[keyOf]bool{}, lostExecs: map[domain.ExecutionID]bool{},
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.s = newSched(w)
	w.swarm = newSwarm(w.rng, newRNG(lateSeed(spec.Seed)), spec.Faults)
	profiles := provider.BuiltinProfiles()
	w.profile = profiles[w.rng.intn(len(profiles))]
	cfg, err := sim.ConfigFor(w.profile)
	if err != nil {
		return nil, err
	}
	cfg.Start, cfg.Clock, cfg.Logger = Start, w.clock.Now, w.log
	if w.sim, err = sim.New(cfg); err != nil {
		return nil, err
	}
	w.apiProc = newProcess(ctx, "api", 1)
	w.apiNotices = newNoticing(w, w.apiProc)
	w.api = w.newHandler(&view{w: w, p: w.apiProc, name: "api", heads: newHeadCache(w, w.apiNotices)}, w.apiNotices, "")
	if w.oracle, err = ledger.New(ledger.Config{Store: w.inner, Clock: w.clock, Logger: w.log, StateCacheEntries: -1}); err != nil {
		return nil, err
	}
	w.transport = &simTransport{w: w}
	nWorkers := 2 + w.rng.intn(2)
	for i := range nWorkers {
		w.workers = append(w.workers, newWorkerProc(w, fmt.Sprintf("w%d", i+1), 1))
	}
	w.agents = newAgents(w, spec.Ops)
	w.tracef(nil, "world: %s, %d workers, %d operations, faults on: %s", w.profile.Name, nWorkers, spec.Ops, w.swarm.describe())
	w.serve = newServeProc(w, 1)
	w.serve.start()
	return w, nil
}

// newHandler is a command handler on v, its ids minted by the world, its
// regressions told to regressions as cache (default domain.CacheState).
func (w *World) newHandler(v *view, regressions eventstore.RegressionObserver, cache string) *ledger.Handler {
	newID := func(prefix string) string {
		if v.p.dead.Load() {
			return prefix + "DEAD" // never stored: a dead process's appends fail
		}
		return w.newID(prefix)
	}
	h, err := ledger.New(ledger.Config{
		Store: v, Clock: w.clock, Logger: w.log, NewID: newID,
		AppendRetryBackoff: time.Nanosecond, // the handler's resends are immediate: the world's clock does not move under them
		// A summary of refusals past the evidence bound is appended at
		// once: the handler's pause between summaries is real time, which
		// the world does not wait for.
		SummaryEvery: time.Nanosecond, After: immediately(w.clock.Now),
		Regressions: regressions, CacheName: cache,
	})
	if err != nil {
		panic(err)
	}
	return h
}

// newID mints deterministic ids: event ids (prefix "") and any other.
func (w *World) newID(prefix string) string {
	w.ids++
	if prefix == "" {
		return fmt.Sprintf("00000000-0000-7000-8000-%012x", w.ids)
	}
	return fmt.Sprintf("%sSIM%d", prefix, w.ids)
}

// tracef adds a line to the trace, prefixed with the step and the world's
// time. A dead process's threads (p dead) write nothing.
func (w *World) tracef(p *process, format string, args ...any) {
	if p != nil && p.dead.Load() {
		return
	}
	line := fmt.Sprintf("%5d %10s  ", w.step, fmtOffset(w.clock.Now().Sub(Start))) + fmt.Sprintf(format, args...)
	w.trace.Write([]byte(line))
	w.trace.Write([]byte{'\n'})
	if w.opts.Timeline {
		w.lines = append(w.lines, line)
	}
}

func fmtOffset(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.3fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%06.3fs", int(d.Minutes()), d.Seconds()-60*float64(int(d.Minutes())))
	}
	return fmt.Sprintf("%dh%02dm%02ds", int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// inject decides whether fault f strikes now (for process p): only in the
// chaos phase, only if the schedule switched f on, at f's rate, and unless
// the spec skips this injection. Every injection is numbered and traced.
func (w *World) inject(p *process, f Fault, format string, args ...any) bool {
	if w.phase != phaseChaos || p != nil && p.dead.Load() || !w.swarm.on(f) || !w.rng.chance(w.swarm.rate[f]) {
		return false
	}
	w.injections++
	what := fmt.Sprintf(format, args...)
	if w.spec.skipped(w.injections) {
		w.tracef(nil, "skip #%d %s: %s", w.injections, f, what)
		return false
	}
	w.injected[f]++
	w.tracef(nil, "inject #%d %s: %s", w.injections, f, what)
	return true
}

// countFault counts behaviour the schedule switched on that is not drawn at
// a rate (an agent deciding again).
func (w *World) countFault(f Fault, format string, args ...any) {
	w.injected[f]++
	w.tracef(nil, "%s: %s", f, fmt.Sprintf(format, args...))
}

// preempt: does the thread about to call the store hand the baton back?
// Scheduling, not a fault: it only reorders what threads do.
func (w *World) preempt() bool {
	return w.phase == phaseChaos && w.rng.chance(w.swarm.preempt)
}

// pause: does a provider call stop for a while before sending or after the
// answer?
func (w *World) pause(p *process) bool {
	return w.phase == phaseChaos && !p.dead.Load() && w.rng.chance(w.swarm.pause)
}

// storeDown reports whether a store outage is on.
func (w *World) storeDown() bool { return w.clock.Now().Before(w.downUntil) }

// relaysCaughtUp reports whether both relays have read the whole log.
func (w *World) relaysCaughtUp() bool {
	for _, r := range w.serve.relays {
		if r.view.pollReady() {
			return false
		}
	}
	return true
}

// armProviderFault may arm one of the simulator's faults for the request
// about to reach it. Execution faults are armed only for a key the provider
// has never seen (so the request surely begins executing and consumes the
// fault: nothing stays armed for later), arrival faults for any request; a
// held response only while none is held.
func (w *World) armProviderFault(p *process, op, key, what string) {
	first := !w.keys[key]
	w.keys[key] = true
	for _, pf := range providerFaults {
		arrival := pf.kind == sim.FaultDelay || pf.kind == sim.FaultDropConnectionBeforeRead
		if !arrival && !first || pf.kind == sim.FaultHoldResponse && w.sim.HeldCount() > 0 {
			continue
		}
		if !w.inject(p, pf.fault, "%s", what) {
			continue
		}
		f := sim.Fault{Kind: pf.kind, OperationID: op}
		if pf.kind == sim.FaultDelay {
			f.Duration = time.Microsecond // real time; the world's latency is net-slow's
		}
		if err := w.sim.Arm(f); err != nil {
			panic(err)
		}
		return
	}
}

// unknownUnder names the Unknown (or Escalated) execution of op under key:
// the one the reconciler resends for.
func (w *World) unknownUnder(op, key string) domain.ExecutionID {
	h, err := ledger.New(ledger.Config{Store: w.inner, Clock: w.clock, Logger: w.log})
	if err != nil {
		return ""
	}
	st, err := h.Load(w.ctx, domain.OperationID(op))
	if err != nil {
		return ""
	}
	for _, x := range st.Executions {
		if string(x.IdempotencyKey) == key && (x.State == domain.ExecUnknown || x.State == domain.ExecEscalated) {
			return x.ID
		}
	}
	return ""
}

// observations are what the world saw happen, for the checks.
type observations struct {
	refusals      []seenRefusal
	writeRefusals []seenWriteRefusal
	forged        []forgedWrite
	claims        int
	claimed       []claimedExec
	notices       []notice
	unnoticed     []unnoticed
	// hostile floods: presentations made, holder writes under a flood, the
	// holder writes the flood may have failed or delayed, and hostile
	// presentations answered Claimed
	hostile        int
	holderWrites   int
	holderFailures []string
	hostileClaims  []hostileClaim
}

type claimedExec struct {
	op   domain.OperationID
	exec domain.ExecutionID
}

type seenRefusal struct {
	op     domain.OperationID
	msg    domain.MessageID
	status domain.ClaimStatus
	reason domain.Reason
}

type seenWriteRefusal struct {
	op      domain.OperationID
	exec    domain.ExecutionID
	command string
	reason  domain.Reason
}

type forgedWrite struct {
	op   domain.OperationID
	exec domain.ExecutionID
	err  error
}

func (w *World) observeClaim(p *process, t *thread, op domain.OperationID, cmd domain.Claim, out ledger.ClaimOutcome, err error) {
	if p.dead.Load() {
		return
	}
	if err != nil {
		w.tracef(p, "%s claim %s on %s → %s", t, cmd.CapabilityID, cmd.MessageID, errText(err))
		return
	}
	w.obs.claims++
	if out.Status == domain.StatusClaimed {
		w.obs.claimed = append(w.obs.claimed, claimedExec{op: op, exec: out.ExecutionID})
		w.tracef(p, "%s claim %s on %s → Claimed %s key %s", t, cmd.CapabilityID, cmd.MessageID, out.ExecutionID, out.Claimed.IdempotencyKey)
		return
	}
	w.tracef(p, "%s claim %s on %s → %s (%s)", t, cmd.CapabilityID, cmd.MessageID, out.Status, out.Reason)
	w.obs.refusals = append(w.obs.refusals, seenRefusal{op: op, msg: cmd.MessageID, status: out.Status, reason: out.Reason})
}

func (w *World) observeWrite(p *process, op domain.OperationID, exec domain.ExecutionID, command string, err error) {
	var r *domain.Refusal
	if p.dead.Load() || !errors.As(err, &r) || r.Reason == domain.ReasonExecutionUnknown || r.Reason == domain.ReasonOperationUnknown {
		return
	}
	w.obs.writeRefusals = append(w.obs.writeRefusals, seenWriteRefusal{op: op, exec: exec, command: command, reason: r.Reason})
}

func asRefusal(err error, r **domain.Refusal) bool { return errors.As(err, r) }

// classOf names an error's kind, in words that do not vary between runs.
func classOf(err error) string {
	switch {
	case errors.Is(err, eventstore.ErrUnavailable):
		return "store unavailable"
	case errors.Is(err, ledger.ErrContention):
		return "contention"
	case errors.Is(err, ledger.ErrCorruptStream):
		return "corrupt stream"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context ended"
	}
	s := err.Error()
	if i := strings.IndexByte(s, ':'); i > 0 {
		s = s[:i]
	}
	return s
}

// memoryStore is the default StoreFactory.
func memoryStore(now func() time.Time) StoreFactory {
	return func(context.Context) (eventstore.Store, func(), error) { return memory.New(now), func() {}, nil }
}

// immediately is an After whose channel has fired already.
func immediately(now func() time.Time) func(time.Duration) <-chan time.Time {
	return func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- now()
		return c
	}
}
