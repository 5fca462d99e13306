package postgres

import (
	"context"
	"errors"
	"sync/atomic"

	"opledger/eventstore"
)

// Group commit defaults (Config.MaxGroupAppends, MaxGroupEvents,
// MaxAppendsInFlight).
const (
	// DefaultMaxGroupAppends bounds the appends one statement carries: past
	// a few dozen the statement's arrays cost more than the commit they
	// share.
	DefaultMaxGroupAppends = 64
	// DefaultMaxGroupEvents bounds the events one statement carries (an
	// append larger than this still goes, alone).
	DefaultMaxGroupEvents = 2 * eventstore.MaxAppendBatch
	// DefaultMaxAppendsInFlight bounds the append statements running at
	// once, each on a connection of its own: while some wait for their
	// commit to reach the disk (PostgreSQL flushes concurrent commits
	// together), the next batch gathers. Four beat one and two at 4 and 16
	// clients on the benchmark machine.
	DefaultMaxAppendsInFlight = 4
)

// groupCommitter gathers concurrent appends into shared statements. An
// append is queued; while fewer than maxInFlight statements run, a runner
// goroutine is started, which takes from the queue as many appends as the
// bounds allow (each to a stream not already in the batch: two appends to
// one stream never share a statement, so each is judged on the state the
// other left), runs them as one statement (appendBatchSQL: one transaction,
// one commit), hands every append its own result, and goes on with the
// queue until it is empty. So an append never waits for a timer: it waits
// at most for the statements already running. When nothing is queued and a
// statement may start, the caller runs its append at once, alone, on its
// own goroutine (no hand-over): with one client, group commit costs
// nothing.
//
// Each append keeps its own condition and result: one whose expected
// version does not hold is simply not written, and the others are. A
// statement that fails for a reason that may be one append's fault (a
// unique violation: an event id already stored; data Postgres refuses; a
// deadlock with another batch over such an id) is answered by running each
// of its appends alone, so one bad append never fails another. A failure
// of the connection or the server is every append's: each gets
// eventstore.ErrUnavailable, and a resend of the same events is safe.
//
// A caller whose context ends while its append is queued takes it out of
// the queue (nothing was written); once the statement runs, the caller
// returns ErrUnavailable at once (the outcome is unknown to it) while the
// statement runs on for the others; it is cancelled only when every one of
// its callers has gone.
type groupCommitter struct {
	store                 *Store
	maxAppends, maxEvents int
	statementGroup[*pendingAppend]

	statements, appends atomic.Int64 // for GroupCommitStats
}

// GroupCommitStats reports how many append statements the store ran and
// how many appends they carried (appends/statements is the mean group
// size; appends run alone after a failed group are counted too).
func (s *Store) GroupCommitStats() (statements, appends int64) {
	return s.group.statements.Load(), s.group.appends.Load()
}

type pendingAppend struct {
	ctx  context.Context
	req  *appendRequest
	done chan appendOutcome // buffered: the runner never blocks on it
}

type appendOutcome struct {
	written bool
	alone   bool // run the append on its own: its statement failed for a reason that may be another append's
	err     error
}

func newGroupCommitter(s *Store, maxAppends, maxEvents, maxRuns int) *groupCommitter {
	g := &groupCommitter{store: s, maxAppends: maxAppends, maxEvents: maxEvents}
	g.statementGroup = statementGroup[*pendingAppend]{maxRun: maxRuns, take: g.take, execute: g.execute}
	return g
}

// commit runs r in the next statement that has room for it and reports
// whether it was written. A unique violation comes back as an error
// wrapping ErrWrongExpectedVersion, as from execAppends.
func (g *groupCommitter) commit(ctx context.Context, r *appendRequest) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, interpretError("append "+r.stream, err)
	}
	p, alone := g.join(func() *pendingAppend { return &pendingAppend{ctx: ctx, req: r, done: make(chan appendOutcome, 1)} })
	if alone {
		// Nothing waits and a statement may start: run it here, alone,
		// without handing the append to another goroutine.
		g.statements.Add(1)
		g.appends.Add(1)
		written, err := g.store.execAppends(ctx, g.store.pool, []*appendRequest{r})
		g.leave()
		if err != nil {
			return false, err
		}
		return written[0], nil
	}
	select {
	case o := <-p.done:
		if o.alone {
			g.statements.Add(1)
			g.appends.Add(1)
			written, err := g.store.execAppends(ctx, g.store.pool, []*appendRequest{r})
			if err != nil {
				return false, err
			}
			return written[0], nil
		}
		return o.written, o.err
	case <-ctx.Done():
		g.withdraw(p) // if still queued: never sent, nothing written
		select {
		case o := <-p.done: // it finished meanwhile: the outcome is known after all
			if !o.alone {
				return o.written, o.err
			}
		default:
		}
		return false, interpretError("append "+r.stream, ctx.Err())
	}
}

// take splits the queue: the appends of the next statement, in order, at
// most maxAppends, to distinct streams, at most maxEvents events (but
// always the first), and those left waiting. Appends whose callers have
// gone are dropped.
func (g *groupCommitter) take(queue []*pendingAppend) (batch, keep []*pendingAppend) {
	var (
		streams = make(map[string]struct{}, min(len(queue), g.maxAppends))
		events  int
	)
	keep = queue[:0]
	for _, p := range queue {
		_, dup := streams[p.req.stream]
		n := len(p.req.b.ids)
		switch {
		case p.ctx.Err() != nil:
			p.done <- appendOutcome{err: interpretError("append "+p.req.stream, p.ctx.Err())}
		case dup || len(batch) >= g.maxAppends || (len(batch) > 0 && events+n > g.maxEvents):
			keep = append(keep, p)
		default:
			batch = append(batch, p)
			streams[p.req.stream] = struct{}{}
			events += n
		}
	}
	return batch, keep
}

// execute runs one statement for batch and hands out the outcomes.
func (g *groupCommitter) execute(batch []*pendingAppend) {
	reqs := make([]*appendRequest, len(batch))
	ctxs := make([]context.Context, len(batch))
	for i, p := range batch {
		reqs[i], ctxs[i] = p.req, p.ctx
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	g.statements.Add(1)
	g.appends.Add(int64(len(reqs)))
	written, err := g.store.execAppends(ctx, g.store.pool, reqs)
	switch {
	case err == nil:
		for i, p := range batch {
			p.done <- appendOutcome{written: written[i]}
		}
	case len(batch) > 1 && !errors.Is(err, eventstore.ErrUnavailable):
		for _, p := range batch {
			p.done <- appendOutcome{alone: true}
		}
	default:
		for _, p := range batch {
			p.done <- appendOutcome{err: err}
		}
	}
}
