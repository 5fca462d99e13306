package simworld

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// A hostile flood (FaultHostileFlood): for a few seconds of the world's
// clock, someone presents hostileRate times a second against one operation
// a worker holds a lease on — its spent capability again under new message
// ids (replays), the holder's message again (duplicate deliveries), renewals
// and outcomes without the lease secret (forged writes) — through a ledger
// handler of its own, the same API the workers call. The presentations are
// made as the world's clock passes their time, at most hostileBatch per
// scheduler step, between the other threads' steps: between a holder's load
// and its append when its store call is preempted. The holder's renewals and
// outcome made meanwhile must not notice (CheckHolderUnderFlood).
const (
	hostileRate  = 50 // presentations a second of the world's clock
	hostileEvery = time.Second / hostileRate
	// hostileBatch bounds the presentations of one scheduler step: a clock
	// that leaps past a flood's time makes its presentations in steps.
	hostileBatch = 25
	// hostileActor is the principal every hostile presentation is made as.
	hostileActor = "hostile"
)

// flood is a hostile flood on: presentations at start, start+hostileEvery,
// ... until end, against holder's execution.
type flood struct {
	n          int // the schedule's floods so far, this one included
	holder     *workerProc
	op         domain.OperationID
	exec       domain.ExecutionID
	epoch      int64
	capability domain.CapabilityID
	msg        domain.MessageID
	worker     string
	start, end time.Time
	total      int // presentations it makes
	made       int
	writes     int // holder writes made under it
}

// due is how many of f's presentations are due at now.
func (f *flood) due(now time.Time) int {
	if now.Before(f.start) {
		return 0
	}
	return min(f.total, int(now.Sub(f.start)/hostileEvery)+1)
}

// next is when f's next batch is due: the clock stops there, so that the
// presentations are made at their rate of the world's clock.
func (f *flood) next() time.Time {
	if f.made >= f.total {
		return f.end
	}
	return f.start.Add(time.Duration(min(f.made+hostileBatch, f.total)-1) * hostileEvery)
}

// holding is a worker that holds a lease now: its delivery claimed an
// execution and has not ended.
func (w *World) holding() []*workerProc {
	var out []*workerProc
	for _, wp := range w.workers {
		if !wp.p.dead.Load() && wp.task != nil && wp.exec != "" {
			out = append(out, wp)
		}
	}
	return out
}

// startFlood floods one of the holders: from now for 1–3 s, or (half the
// time, when the holder's lease renewal waits at its timer) from up to
// 1.5 s before the renewal is due to up to 1.5 s after it.
func (w *World) startFlood(holders []*workerProc) {
	wp := holders[w.rng.intn(len(holders))]
	now := w.clock.Now()
	start, end := now, now.Add(w.rng.between(time.Second, 3*time.Second))
	if r := wp.renew; r != nil && r.park != nil && r.park.kind == parkTimer && w.rng.chance(0.5) {
		due := r.park.due
		start = due.Add(-w.rng.between(200*time.Millisecond, 1500*time.Millisecond))
		if start.Before(now) {
			start = now
		}
		end = due.Add(w.rng.between(200*time.Millisecond, 1500*time.Millisecond))
	}
	if w.hostile == nil {
		// A process as the API's: its own connection to the store (with its
		// head cache) and its own regression recorder.
		w.hostile = newProcess(w.ctx, hostileActor, 1)
		w.hostileNotices = newNoticing(w, w.hostile)
		v := &view{w: w, p: w.hostile, name: hostileActor, heads: newHeadCache(w, w.hostileNotices), evidenceOnOpStream: w.opts.hostileEvidenceOnOpStream}
		w.hostileLedger = w.newHandler(v, w.hostileNotices, "")
	}
	w.floods++
	w.flood = &flood{
		n: w.floods, holder: wp, op: wp.op, exec: wp.exec, epoch: wp.epoch, capability: wp.capability, msg: wp.claimed,
		worker: wp.id, start: start, end: end, total: int(end.Sub(start) / hostileEvery),
	}
	w.tracef(nil, "hostile flood #%d on %s (%s held by %s): %d presentations from %s to %s",
		w.floods, wp.op, wp.exec, wp.id, w.flood.total, fmtOffset(start.Sub(Start)), fmtOffset(end.Sub(Start)))
}

// trackFlood ends the flood once it made its presentations and its time
// passed.
func (w *World) trackFlood() {
	f := w.flood
	if f == nil || f.made < f.total || w.clock.Now().Before(f.end) {
		return
	}
	w.tracef(nil, "hostile flood #%d on %s ends: %d presentations, %d holder writes under it", f.n, f.op, f.made, f.writes)
	w.flood = nil
}

// stopFlood ends the flood where it is (the faults stop).
func (w *World) stopFlood() {
	if f := w.flood; f != nil {
		w.tracef(nil, "hostile flood #%d on %s stops: %d of %d presentations, %d holder writes under it", f.n, f.op, f.made, f.total, f.writes)
		w.flood = nil
	}
}

// present makes the flood's next n presentations, and traces their answers
// on one line.
func (w *World) present(n int) {
	f := w.flood
	w.hostileNotices.flush(w.ctx)
	var answers []string
	count := map[string]int{}
	for range n {
		a := w.presentOne(f, f.made)
		f.made++
		w.obs.hostile++
		if count[a] == 0 {
			answers = append(answers, a)
		}
		count[a]++
	}
	for i, a := range answers {
		answers[i] = fmt.Sprintf("%s×%d", a, count[a])
	}
	w.tracef(nil, "hostile presents %d against %s (%d/%d): %s", n, f.op, f.made, f.total, strings.Join(answers, " "))
}

// presentOne makes presentation i of f and returns its answer, as the
// trace gives it.
func (w *World) presentOne(f *flood, i int) string {
	ctx, h := w.ctx, w.hostileLedger
	by := ledger.Cause{Actor: hostileActor}
	switch i % 4 {
	case 0, 1, 2:
		cmd := domain.Claim{MessageID: f.msg, CapabilityID: f.capability, WorkerID: hostileActor}
		if i%4 != 2 { // a replay: the spent capability under a new message id
			cmd.MessageID = domain.MessageID(fmt.Sprintf("MSG-HOSTILE-%d-%d", f.n, i))
		} // else the holder's message delivered again
		out, err := h.ClaimAs(ctx, f.op, cmd, by)
		if err != nil {
			return errText(err)
		}
		if out.Status == domain.StatusClaimed {
			w.obs.hostileClaims = append(w.obs.hostileClaims, hostileClaim{op: f.op, msg: cmd.MessageID, exec: out.ExecutionID, cuts: len(w.cuts)})
			return "Claimed"
		}
		w.obs.refusals = append(w.obs.refusals, seenRefusal{op: f.op, msg: cmd.MessageID, status: out.Status, reason: out.Reason})
		return string(out.Status)
	default: // a write without the lease secret
		var err error
		command := domain.CommandRecordOutcome
		if i%8 == 3 {
			command = domain.CommandRenewLease
			_, err = h.RenewLease(ctx, f.op, domain.RenewLease{ExecutionID: f.exec, LeaseEpoch: f.epoch, LeaseSecret: "guessed", WorkerID: f.worker}, by)
		} else {
			err = h.RecordOutcome(ctx, f.op, domain.RecordOutcome{ExecutionID: f.exec, LeaseEpoch: f.epoch, Outcome: domain.NotApplied, Detail: "hostile"}, by)
		}
		w.observeWrite(w.hostile, f.op, f.exec, command, err)
		var r *domain.Refusal
		if err == nil || asRefusal(err, &r) && r.Reason != domain.ReasonExecutionUnknown && r.Reason != domain.ReasonOperationUnknown {
			w.obs.forged = append(w.obs.forged, forgedWrite{op: f.op, exec: f.exec, err: err})
		}
		return errText(err)
	}
}

// floodOn reports whether a flood presents against wp's execution exec now.
func (w *World) floodOn(wp *workerProc, exec domain.ExecutionID) bool {
	f := w.flood
	return f != nil && f.holder == wp && f.exec == exec && !w.clock.Now().Before(f.start)
}

// holderWrote observes a write of the lease holder wp (a renewal or an
// outcome) that ended with err. A write made while a flood was on (on,
// when it began, or now) must succeed, or fail only as the flood cannot
// make it: the store unreachable, the process ending, or a refusal the
// store, read now, gives again (again decides the same command on the
// operation as the store holds it: its lease lapsed or taken). A lossy
// failover during the write excuses it (the store lost what it decided on).
func (w *World) holderWrote(wp *workerProc, op domain.OperationID, exec domain.ExecutionID, command string, on bool, cuts int, err error,
	again func(*domain.Operation, time.Time) ([]domain.Event, error)) {
	if wp.p.dead.Load() || !on && !w.floodOn(wp, exec) {
		return
	}
	w.obs.holderWrites++
	if f := w.flood; f != nil {
		f.writes++
	}
	w.tracef(wp.p, "%s's %s for %s under the hostile flood → %s", wp.id, command, exec, errText(err))
	var r *domain.Refusal
	why := ""
	switch {
	case err == nil, len(w.cuts) != cuts:
	case errors.Is(err, eventstore.ErrUnavailable), errors.Is(err, errProcessDead),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	case asRefusal(err, &r):
		st, lerr := w.oracle.Load(w.ctx, op)
		if lerr != nil {
			break
		}
		if _, aerr := again(st, w.clock.Now()); aerr == nil {
			why = fmt.Sprintf("refused %s although the store holds its lease for it", r.Reason)
		}
	default:
		why = "failed: " + errText(err)
	}
	if why != "" {
		w.obs.holderFailures = append(w.obs.holderFailures, fmt.Sprintf("%s: %s's %s for %s at %s under a hostile flood %s",
			op, wp.id, command, exec, fmtOffset(w.clock.Now().Sub(Start)), why))
	}
}

// holderConflict: the holder's append to its operation's stream under a
// flood met a version conflict; one with an event the hostile caller wrote
// there is a delay the flood caused.
func (w *World) holderConflict(v *view, stream string, expected eventstore.ExpectedVersion) {
	f := w.flood
	if f == nil || v.p.dead.Load() || f.holder.view != v || stream != f.op.StreamName() || w.clock.Now().Before(f.start) {
		return
	}
	from, ok := expected.Version()
	if !ok {
		return
	}
	page, err := w.inner.ReadStream(w.ctx, stream, from+1, 1000)
	if err != nil {
		return
	}
	for _, rec := range page {
		if rec.Type == domain.TypeClaimed {
			continue // a hostile claim accepted is judged on its own (checkHostile)
		}
		if d, err := codec.DecodeRecorded(rec); err == nil && d.Meta.Actor == hostileActor {
			w.obs.holderFailures = append(w.obs.holderFailures, fmt.Sprintf("%s: %s's append at version %d under a hostile flood met %s@%d, written by the hostile caller",
				f.op, f.worker, from, rec.Type, rec.Version))
			return
		}
	}
}

// hostileClaim is a hostile presentation the ledger answered Claimed.
type hostileClaim struct {
	op   domain.OperationID
	msg  domain.MessageID
	exec domain.ExecutionID
	cuts int // lossy failovers before it
}

// checkHostile: the holders' writes under a flood succeeded (or failed as
// the flood cannot make them), no hostile presentation was accepted, and
// no operation's stream holds an event of the hostile caller.
func (w *World) checkHostile(fv *finalView, fail func(string, string, ...any)) {
	for _, s := range w.obs.holderFailures {
		fail(CheckHolderUnderFlood, "%s", s)
	}
	for _, c := range w.obs.hostileClaims {
		if c.cuts == 0 { // a lossy failover may have taken the spent capability's claim
			fail(CheckHolderUnderFlood, "%s: a hostile presentation of message %s was Claimed (%s)", c.op, c.msg, c.exec)
		}
	}
	if w.obs.hostile == 0 {
		return
	}
	// One violation per stream: its first hostile event and how many.
	var streams []string
	first := map[string]string{}
	count := map[string]int{}
	for _, rec := range fv.events {
		if _, inEvidence, ok := domain.OperationOfStream(rec.StreamID); !ok || inEvidence || rec.Type == domain.TypeClaimed {
			continue // (a hostile claim accepted is judged above)
		}
		if d, err := codec.DecodeRecorded(rec); err != nil || d.Meta.Actor != hostileActor {
			continue
		}
		if count[rec.StreamID] == 0 {
			streams = append(streams, rec.StreamID)
			first[rec.StreamID] = fmt.Sprintf("%s@%d", rec.Type, rec.Version)
		}
		count[rec.StreamID]++
	}
	for _, st := range streams {
		fail(CheckHolderUnderFlood, "%s holds %d events of the hostile caller, the first %s: presentations moved the version its holder appends at", st, count[st], first[st])
	}
}
