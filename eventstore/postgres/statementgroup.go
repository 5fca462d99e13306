package postgres

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// statementGroup is what group commit (groupcommit.go) and group read
// (groupread.go) share: requests that arrive while maxRun statements of
// their kind are running wait in a queue, and a runner takes them from it,
// a batch per statement (take decides which), until it is empty. A
// request never waits for a timer: at most for the statements already
// running. When nothing is queued and a statement may start, the caller
// runs its request at once, on its own goroutine (join reports so), and
// with one client grouping costs nothing.
type statementGroup[P comparable] struct {
	maxRun int
	// take splits the queue, under the lock, into the next statement's
	// batch and the requests left waiting, in order (keep may reuse
	// queue's array); it answers the requests whose callers have gone
	// itself.
	take func(queue []P) (batch, keep []P)
	// execute runs one statement for batch and answers each request.
	execute func(batch []P)

	mu      sync.Mutex
	queue   []P
	running int
}

// join either admits the caller to run its request alone, now (alone:
// the caller holds a statement slot and must call leave when done; mk is
// not called), or queues the request mk makes for a runner, starting one
// if a statement may start, and returns it.
func (g *statementGroup[P]) join(mk func() P) (p P, alone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 && g.running < g.maxRun {
		g.running++
		return p, true
	}
	p = mk()
	g.queue = append(g.queue, p)
	if g.running < g.maxRun {
		g.running++
		go g.run()
	}
	return p, false
}

// leave gives back the slot of a request run alone: to a runner when
// requests were queued meanwhile.
func (g *statementGroup[P]) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 {
		go g.run()
	} else {
		g.running--
	}
}

// withdraw takes p out of the queue, if it is still there (no statement
// carries it).
func (g *statementGroup[P]) withdraw(p P) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.queue, p); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
}

// queued is how many requests wait.
func (g *statementGroup[P]) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// run is a runner: it takes batches from the queue until it is empty.
func (g *statementGroup[P]) run() {
	for {
		g.mu.Lock()
		batch, keep := g.take(g.queue)
		clear(g.queue[len(keep):]) // let the taken ones go
		g.queue = keep
		if len(batch) == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.execute(batch)
	}
}

// batchContext is the context a shared statement runs on: the values of
// its first caller's, cancelled once every caller's context has ended (the
// statement then has nobody left to answer).
func batchContext(ctxs []context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctxs[0]))
	left := atomic.Int64{}
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
