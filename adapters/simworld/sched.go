package simworld

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The scheduler runs the real roles, each on goroutines of its own, one at a
// time: a thread runs only while it holds the baton, and hands it back when
// it parks (at a timer of the world's clock, at a gate the scheduler opens)
// or ends. So the order of everything the roles do is the order of the
// scheduler's choices, and those come from the seed. A goroutine a role
// starts by itself (the worker's lease renewal) is a thread too: it parks
// through the After the world injects.

// parkKind says how a parked thread may be woken.
type parkKind int

const (
	// parkTimer: a timer made by an injected After; the scheduler fires it
	// once the world's clock reaches due.
	parkTimer parkKind = iota
	// parkGate: a gate in the world's code (a store call, a provider
	// request in flight, a held response); the scheduler opens it, or times
	// it out once due passes.
	parkGate
)

// wake is what opens a gate.
type wake int

const (
	wakeGo      wake = iota // proceed (resume, deliver, release)
	wakeTimeout             // the gate's deadline passed
	wakeDead                // the thread's process died
)

func (w wake) String() string {
	switch w {
	case wakeGo:
		return "go"
	case wakeTimeout:
		return "timeout"
	}
	return "dead"
}

// park is where a thread waits.
type park struct {
	kind  parkKind
	label string
	// timer: when it may fire. gate: when it times out (zero: never).
	due time.Time
	// gate: from when the scheduler may open it (zero: at once); false
	// openable: only its timeout (or release, for holds) opens it.
	readyAt  time.Time
	openable bool
	held     bool // a response held by the provider: opened by its release
	// ready, when set, must also hold for the scheduler to open the gate
	// (the relay polls only once the log has grown).
	ready func() bool
	timer chan time.Time
	gate  chan wake
}

// thread is one goroutine of a role, as the scheduler knows it.
type thread struct {
	id   int
	name string
	proc *process
	park *park
	done bool
	// renewal: a thread a role started beside another (the worker's lease
	// renewal), which ends when that one stops it.
	renewal bool
	// onDone runs on the scheduler's goroutine once the thread ended (never
	// for a thread of a process that died).
	onDone func()
}

func (t *thread) String() string { return t.name }

// deadline is a context deadline on the world's clock: a provider call's
// timeout. Firing it cancels the context, which wakes the thread parked
// under it.
type deadline struct {
	t      *thread
	at     time.Time
	label  string
	cancel context.CancelFunc
}

// sched is the baton: the state only the scheduler goroutine and the thread
// holding the baton touch.
type sched struct {
	w         *World
	yield     chan *thread
	threads   []*thread
	deadlines []*deadline
	nextID    int
	watchdog  *time.Timer
}

// yieldTimeout bounds how long the scheduler waits for a thread to park or
// end. A thread that does neither is blocked outside the world's gates: a
// bug of the simulator, reported loudly rather than waited for.
const yieldTimeout = 2 * time.Minute

func newSched(w *World) *sched {
	t := time.NewTimer(yieldTimeout)
	t.Stop()
	return &sched{w: w, yield: make(chan *thread), watchdog: t}
}

// wait takes the baton back: it returns the thread that parked or ended.
func (s *sched) wait() *thread {
	s.watchdog.Reset(yieldTimeout)
	defer s.watchdog.Stop()
	select {
	case t := <-s.yield:
		if t.done && t.onDone != nil {
			f := t.onDone
			t.onDone = nil
			f()
		}
		return t
	case <-s.watchdog.C:
		panic(fmt.Sprintf("simworld: no thread parked or ended within %s (schedule %s, step %d): a thread is blocked outside the world's gates",
			yieldTimeout, s.w.spec, s.w.step))
	}
}

// spawn starts f as a thread of p and lets it run until it parks or ends.
// setup, when given, sees the thread before it runs.
func (s *sched) spawn(p *process, name string, setup func(*thread), f func(ctx context.Context)) *thread {
	s.nextID++
	t := &thread{id: s.nextID, name: name, proc: p}
	s.threads = append(s.threads, t)
	if setup != nil {
		setup(t)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f(p.ctx)
		if p.dead.Load() {
			return // nobody waits for a dead process's threads but its WaitGroup
		}
		t.done = true
		s.yield <- t
	}()
	s.wait()
	return t
}

// adopt registers a thread a role started by itself (it announces itself by
// parking at the world's After).
func (s *sched) adopt(p *process, name string) *thread {
	s.nextID++
	t := &thread{id: s.nextID, name: name, proc: p}
	s.threads = append(s.threads, t)
	return t
}

// after is an injected After for thread t: a timer on the world's clock. The
// thread parks (yield) unless this is the first park of a thread that runs
// beside another (the lease renewal's first timer, which the worker's call
// waits for instead, see renewal).
func (s *sched) after(t *thread, label string, d time.Duration, yield bool) <-chan time.Time {
	if t.proc.dead.Load() {
		ch := make(chan time.Time, 1)
		ch <- time.Time{}
		return ch
	}
	p := &park{kind: parkTimer, label: label, due: s.w.clock.Now().Add(d), timer: make(chan time.Time, 1)}
	t.park = p
	if yield {
		s.yield <- t
	}
	return p.timer
}

// gate parks t until the scheduler opens the gate, its timeout passes, ctx
// ends (it then returns wakeDead with ctx's error) or t's process dies.
func (s *sched) gate(ctx context.Context, t *thread, p *park) (wake, error) {
	if t.proc.dead.Load() {
		return wakeDead, errProcessDead
	}
	if err := ctx.Err(); err != nil {
		return wakeDead, err // nothing to wait for: the caller goes on at once
	}
	p.kind, p.gate = parkGate, make(chan wake, 1)
	t.park = p
	s.yield <- t
	select {
	case w := <-p.gate:
		if w == wakeDead {
			return w, errProcessDead
		}
		return w, nil
	case <-ctx.Done():
		return wakeDead, ctx.Err()
	}
}

// fire fires t's timer and waits for the baton.
func (s *sched) fire(t *thread) {
	p := t.park
	t.park = nil
	p.timer <- s.w.clock.Now()
	s.wait()
}

// open opens t's gate with w and waits for the baton.
func (s *sched) open(t *thread, w wake) {
	p := t.park
	t.park = nil
	p.gate <- w
	s.wait()
}

// addDeadline arms a deadline on the world's clock for t: cancel runs when
// the scheduler fires it. The returned func disarms it.
func (s *sched) addDeadline(t *thread, label string, d time.Duration, cancel context.CancelFunc) func() {
	if t.proc.dead.Load() {
		return func() {}
	}
	dl := &deadline{t: t, at: s.w.clock.Now().Add(d), label: label, cancel: cancel}
	s.deadlines = append(s.deadlines, dl)
	return func() {
		if t.proc.dead.Load() {
			return // kill dropped it
		}
		for i, x := range s.deadlines {
			if x == dl {
				s.deadlines = append(s.deadlines[:i], s.deadlines[i+1:]...)
				return
			}
		}
	}
}

// fireDeadline cancels dl's context and waits for the thread it wakes.
func (s *sched) fireDeadline(dl *deadline) {
	for i, x := range s.deadlines {
		if x == dl {
			s.deadlines = append(s.deadlines[:i], s.deadlines[i+1:]...)
			break
		}
	}
	dl.cancel()
	s.wait()
}

// live returns the threads not done, in creation order, forgetting the rest.
func (s *sched) live() []*thread {
	out := s.threads[:0]
	for _, t := range s.threads {
		if !t.done {
			out = append(out, t)
		}
	}
	s.threads = out
	return out
}

// kill ends every thread of p: p is marked dead (its store view and network
// answer errors, its timers fire at once, its gates open dead), its parked
// threads are woken, and kill waits until they all returned. Dead threads
// draw nothing from the seed and write nothing to the trace.
func (s *sched) kill(p *process) {
	// All bookkeeping first: once woken, p's threads run beside each other
	// (touching nothing of the world but what they check p.dead for).
	p.dead.Store(true)
	var wakes []func()
	for _, t := range s.live() {
		if t.proc != p {
			continue
		}
		t.done = true
		pk := t.park
		t.park = nil
		switch {
		case pk == nil || t.renewal:
			// running beside a parked thread of p (the lease renewal): it
			// ends when that thread stops it, or when p's context ends.
		case pk.kind == parkTimer:
			wakes = append(wakes, func() { pk.timer <- time.Time{} })
		default:
			wakes = append(wakes, func() { pk.gate <- wakeDead })
		}
	}
	for i, dl := range s.deadlines {
		if dl.t.proc == p {
			s.deadlines[i] = nil
		}
	}
	s.deadlines = compact(s.deadlines)
	p.cancel()
	for _, wake := range wakes {
		wake()
	}
	p.wg.Wait()
	s.live()
}

func compact[T any](xs []*T) []*T {
	out := xs[:0]
	for _, x := range xs {
		if x != nil {
			out = append(out, x)
		}
	}
	return out
}

// errProcessDead is what a dead process's calls fail with.
var errProcessDead = fmt.Errorf("simulated process died")

// process is one simulated OS process: a worker, serve, or the agents' API.
type process struct {
	name        string
	incarnation int
	ctx         context.Context
	cancel      context.CancelFunc
	dead        atomic.Bool
	frozen      bool
	frozenUntil time.Time
	wg          sync.WaitGroup
}

func newProcess(parent context.Context, name string, incarnation int) *process {
	ctx, cancel := context.WithCancel(parent)
	return &process{name: name, incarnation: incarnation, ctx: ctx, cancel: cancel}
}
