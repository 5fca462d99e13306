package simworld

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/regression"
	"opledger/eventstore"
)

// A failover (store-failover, store-failover-lossy) loses the primary and
// promotes a standby: every call in flight is reset, the store answers
// nothing until the promote (failoverDown), and with an asynchronous
// standby the last transactions are gone.
const (
	failoverDownMin = 200 * time.Millisecond
	failoverDownMax = 30 * time.Second
	// maxLostTransactions bounds what one lossy failover loses: an
	// asynchronous standby a few hundred milliseconds to seconds behind.
	maxLostTransactions = 8
)

// loser is a store that can lose its last events as a failover to an
// asynchronous standby does (memory.Store).
type loser interface {
	LoseLast(n int)
	Len() int
}

// cut is one lossy failover: when, and what the log lost.
type cut struct {
	at           time.Time
	step         int
	transactions int
	events       int
	streams      map[string]bool
}

// checkpointSave is a relay's checkpoint as saved, after how many of the
// log's transactions: a lossy failover keeps the saves made before the
// transactions it loses (one database, one commit order).
type checkpointSave struct {
	name, position string
	tx             int
}

// failover promotes a standby: calls in flight are reset, the store is
// down until the promote, and when lossy the log loses its last 1–8
// transactions. serve restarts after a lossy one (see restartAfterCut).
func (w *World) failover(lossy bool) {
	w.failovers++
	up := w.clock.Now().Add(w.rng.between(failoverDownMin, failoverDownMax))
	if up.After(w.downUntil) {
		w.downUntil = up
	}
	if !lossy {
		w.tracef(nil, "failover to a synchronous standby: calls in flight reset, store back at %s", fmtOffset(w.downUntil.Sub(Start)))
		return
	}
	l := w.inner.(loser)
	n := 1 + w.rng.intn(maxLostTransactions)
	keepTx := max(len(w.txLens)-n, 0)
	keep := 0
	if keepTx > 0 {
		keep = w.txLens[keepTx-1]
	}
	lost := w.readAfter(keep)
	c := cut{at: w.clock.Now(), step: w.step, transactions: len(w.txLens) - keepTx, events: len(lost), streams: map[string]bool{}}
	for _, rec := range lost {
		c.streams[rec.StreamID] = true
		w.noteLost(rec)
	}
	l.LoseLast(l.Len() - keep)
	w.txLens = w.txLens[:keepTx]
	w.rollBackCheckpoints(keepTx)
	w.cuts = append(w.cuts, c)
	w.appends++ // the log changed under the relays
	streams := slices.Sorted(func(yield func(string) bool) {
		for s := range c.streams {
			if !yield(s) {
				return
			}
		}
	})
	w.tracef(nil, "failover to an asynchronous standby: %d transactions (%d events) lost of %v; store back at %s",
		c.transactions, c.events, streams, fmtOffset(w.downUntil.Sub(Start)))
	w.pruneObservations()
	w.restartAfterCut()
}

// readAfter reads the log after its first keep events.
func (w *World) readAfter(keep int) []eventstore.RecordedEvent {
	var after eventstore.Position
	if keep > 0 {
		p, err := w.inner.ParsePosition(strconv.Itoa(keep))
		if err != nil {
			panic(err) // the memory store's positions
		}
		after = p
	}
	var out []eventstore.RecordedEvent
	for {
		page, err := w.inner.ReadAll(w.ctx, after, 1000)
		if err != nil {
			panic(err) // the memory store, read directly
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Position
	}
}

// noteLost remembers what a lost event said that the checks need: the
// keys its decision derived (a request may have carried one), and the
// executions it claimed, whose ids a new execution may take (ids derive
// from the operation and a count): the not-applied check cannot tie a
// request sent for one to the execution that holds its id now.
func (w *World) noteLost(rec eventstore.RecordedEvent) {
	d, err := codec.DecodeRecorded(rec)
	if err != nil {
		return
	}
	switch ev := d.Event.(type) {
	case domain.Decided:
		op, _, _ := domain.OperationOfStream(rec.StreamID)
		w.lostKeys[keyOf{op, string(ev.IdempotencyKey)}] = true
	case domain.Claimed:
		w.lostExecs[ev.ExecutionID] = true
	}
}

type keyOf struct {
	op  domain.OperationID
	key string
}

// rollBackCheckpoints sets each relay's checkpoint to the last one saved
// before the transactions lost.
func (w *World) rollBackCheckpoints(keepTx int) {
	kept := w.cpHistory[:0]
	saved := map[string]string{}
	for _, s := range w.cpHistory {
		if s.tx <= keepTx {
			kept = append(kept, s)
			saved[s.name] = s.position
		}
	}
	w.cpHistory = kept
	w.checkpointsSaved = saved
}

// pruneObservations forgets refusals whose evidence the log lost: the
// evidence checks hold for what the store still has.
func (w *World) pruneObservations() {
	ev := evidenceIn(w.readAfter(0))
	w.obs.refusals = slices.DeleteFunc(w.obs.refusals, func(r seenRefusal) bool { return !ev.presented[r.evidenceKey()] })
	w.obs.writeRefusals = slices.DeleteFunc(w.obs.writeRefusals, func(r seenWriteRefusal) bool { return !ev.refusedWrites[r.evidenceKey()] })
}

// restartAfterCut restarts serve when the store comes back. Its relays
// resume from the checkpoint table, which went back with the log: a relay
// that outlived the failover would follow from a position past the log's
// end, which it does not check yet (docs/simulation.md, What is not).
func (w *World) restartAfterCut() {
	if !w.serve.p.dead.Load() {
		w.s.kill(w.serve.p)
	}
	w.serveDownUntil = w.downUntil
	w.tracef(nil, "serve restarts after the lossy failover")
}

// canLose reports whether the store can lose transactions (and has some).
func (w *World) canLose() bool {
	_, ok := w.inner.(loser)
	return ok && len(w.txLens) > 0
}

// committed notes a transaction the store committed (a store that can
// lose them only).
func (w *World) committed() {
	l, ok := w.inner.(loser)
	if !ok {
		return
	}
	if n := l.Len(); len(w.txLens) == 0 || n > w.txLens[len(w.txLens)-1] {
		w.txLens = append(w.txLens, n)
	}
}

// holds reports whether the store holds event id at version v of stream.
func (w *World) holds(stream string, v int64, id string) bool {
	page, err := w.inner.ReadStream(w.ctx, stream, v, 1)
	return err == nil && len(page) == 1 && page[0].Version == v && page[0].ID == id
}

// notice is a regression a process's cache noticed.
type notice struct {
	proc   string
	cache  string
	stream string
	at     time.Time
	cuts   int // lossy failovers before it
}

// unnoticed is the API's state cache reading a stream it was ahead of
// without noticing.
type unnoticed struct {
	op       domain.OperationID
	seen     int64
	held     int64
	at       time.Time
	anchorID string
}

// noticing is a process's regression observer: the world sees every
// notice (for the checks), the process's recorder records it.
type noticing struct {
	w   *World
	p   *process
	rec *regression.Recorder
}

func newNoticing(w *World, p *process) *noticing {
	v := &view{w: w, p: p, name: p.name + "/regressions"} // no thread: it never parks
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: v, Noticer: p.name, Clock: w.clock, Logger: w.log})
	if err != nil {
		panic(err) // a constant configuration
	}
	return &noticing{w: w, p: p, rec: rec}
}

func (n *noticing) ObserveRegression(ctx context.Context, g eventstore.Regression) {
	if !n.p.dead.Load() {
		n.w.obs.notices = append(n.w.obs.notices, notice{proc: n.p.name, cache: g.Cache, stream: g.Stream, at: n.w.clock.Now(), cuts: len(n.w.cuts)})
		n.w.tracef(n.p, "%s %s noticed a regression: %s held version %d, the store holds %d", n.p.name, g.Cache, g.Stream, g.SeenVersion, g.HeldVersion)
	}
	n.rec.ObserveRegression(ctx, g)
}

// flush records what the recorder could not write yet.
func (n *noticing) flush(ctx context.Context) {
	if err := n.rec.Flush(ctx); err != nil {
		n.w.tracef(n.p, "%s: a regression still unrecorded (%s)", n.p.name, errText(err))
	}
}

// beforeAgentRead: when the API's state cache is ahead of the stream (a
// lossy failover took what it remembers), the read about to be made must
// notice it, in the state cache itself (the head cache noticing too does
// not make the handler drop its state); it returns what to check after
// the read (nil: nothing).
func (w *World) beforeAgentRead(op domain.OperationID) func(err error) {
	if len(w.cuts) == 0 {
		return nil
	}
	v, anchor, ok := w.api.Cached(op)
	if !ok || w.holds(op.StreamName(), v, anchor) {
		return nil
	}
	before := len(w.obs.notices)
	return func(err error) {
		if err != nil {
			return // a read that failed saw nothing
		}
		for _, n := range w.obs.notices[before:] {
			if n.proc == w.apiProc.name && n.cache == domain.CacheState && n.stream == op.StreamName() {
				return
			}
		}
		held := eventstore.NoStreamVersion
		if page, err := w.inner.ReadStream(w.ctx, op.StreamName(), 0, 100_000); err == nil && len(page) > 0 {
			held = page[len(page)-1].Version
		}
		w.obs.unnoticed = append(w.obs.unnoticed, unnoticed{op: op, seen: v, held: held, at: w.clock.Now(), anchorID: anchor})
		w.tracef(nil, "agent %s: the API's state cache held version %d, the store holds %d, and the read noticed nothing", op, v, held)
	}
}

// lossyQuiet: after a lossy failover the world is quiet only once no
// execution is left open (a lease the loss left behind lapses, the
// reconciler settles it) and the lost-effect check read the provider's
// export whole after that and after the last loss (steps, not the clock:
// many steps share one moment).
func (w *World) lossyQuiet() bool {
	if len(w.cuts) == 0 {
		return true
	}
	return !w.trackOpen() && w.exportScannedStep > w.cuts[len(w.cuts)-1].step && w.exportScannedStep > w.lastOpenStep
}

// trackOpen looks, after a lossy failover, whether an execution is open
// (again only when the log changed) and notes the step; the loop calls it
// at every step, so that one open only during the chaos phase counts too.
func (w *World) trackOpen() bool {
	if len(w.cuts) == 0 {
		return false
	}
	if w.openAt != w.appends+1 { // the log changed since the last look
		w.open = false
		for _, a := range w.agents {
			st, err := w.oracle.Load(w.ctx, a.op)
			if err != nil {
				return true
			}
			for _, x := range st.Executions {
				w.open = w.open || x.State == domain.ExecExecuting || x.State == domain.ExecUnknown
			}
		}
		w.openAt = w.appends + 1
	}
	if w.open {
		w.lastOpenStep = w.step
	}
	return w.open
}

func (c cut) String() string {
	return fmt.Sprintf("lossy failover at %s (%d transactions, %d events)", fmtOffset(c.at.Sub(Start)), c.transactions, c.events)
}

// headCache is a process's store connection's memory of each stream's
// last event, as eventstore/postgres keeps it (regressed.go): what the
// deployment's store does, modelled over the memory store, which keeps
// none. A read that ends before a version it knew, or finds another event
// there, is a regression (head_cache); an append expecting the version it
// knew where the store now holds another event is refused (the caller
// catches up and notices), so no command decided on a history the store
// lost is appended on a stream that grew back to the same version.
type headCache struct {
	w       *World
	notices *noticing
	m       map[string]headSeen
}

type headSeen struct {
	version int64
	id      string
}

func newHeadCache(w *World, n *noticing) *headCache {
	return &headCache{w: w, notices: n, m: map[string]headSeen{}}
}

// regressed forgets stream and tells the process's recorder.
func (h *headCache) regressed(ctx context.Context, stream string, known headSeen, held int64, heldID, detail string) {
	delete(h.m, stream)
	h.notices.ObserveRegression(ctx, eventstore.Regression{Cache: domain.CacheHead, Stream: stream, SeenVersion: known.version,
		SeenEventID: known.id, HeldVersion: held, HeldEventID: heldID, Detail: detail})
}

// read checks a stream read against what the cache knew, then remembers
// the stream's end when the read reached it.
func (h *headCache) read(ctx context.Context, stream string, from int64, limit int, page []eventstore.RecordedEvent) {
	known, ok := h.m[stream]
	if ok && len(h.w.cuts) > 0 && known.version >= from {
		checked := false
		for _, e := range page {
			if e.Version == known.version {
				checked = true
				if e.ID != known.id {
					h.regressed(ctx, stream, known, page[len(page)-1].Version, e.ID,
						fmt.Sprintf("%s holds event %s at version %d, not the one this store had read or written", stream, e.ID, known.version))
					return
				}
			}
		}
		if !checked && len(page) < limit {
			held := eventstore.NoStreamVersion
			if len(page) > 0 {
				held = page[len(page)-1].Version
			}
			h.regressed(ctx, stream, known, held, "", fmt.Sprintf("%s ends before version %d, which this store had read or written", stream, known.version))
			return
		}
	}
	if n := len(page); n > 0 && n < limit {
		h.m[stream] = headSeen{page[n-1].Version, page[n-1].ID}
	}
}

// beforeAppend refuses an append expecting the version the cache knew
// where the store holds another event now, or ends before it.
func (h *headCache) beforeAppend(ctx context.Context, stream string, expected eventstore.ExpectedVersion) bool {
	if h.admits(stream, expected) {
		return true
	}
	known := h.m[stream]
	h.regressed(ctx, stream, known, eventstore.NoStreamVersion, "", fmt.Sprintf("%s no longer holds the event at version %d this store had read or written", stream, known.version))
	return false
}

// admits reports whether an append expecting expected passes the cache's
// check: it does not expect the version the cache knew where the store
// holds another event now, or ends before it. It changes nothing: an append
// in flight across a failover is checked so by the statement the store
// sent, whose answer is lost.
func (h *headCache) admits(stream string, expected eventstore.ExpectedVersion) bool {
	known, ok := h.m[stream]
	want, exact := expected.Version()
	return !ok || !exact || len(h.w.cuts) == 0 || known.version != want || h.w.holds(stream, want, known.id)
}

// appended remembers the stream's end after an append.
func (h *headCache) appended(stream string, res eventstore.AppendResult, events []eventstore.EventData) {
	h.m[stream] = headSeen{res.NextExpectedVersion, events[len(events)-1].ID}
}
