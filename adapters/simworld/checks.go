package simworld

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// Violation is one check that failed after a schedule.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// The checks, by name.
const (
	CheckRefunds         = "refunds-per-operation"  // at most one refund created at the provider per operation
	CheckWireKeys        = "provider-key-derived"   // every key on the wire is one the operation's decisions derived
	CheckRefusalRecorded = "refusal-recorded"       // every refused presentation is evidence in the log
	CheckWriteRecorded   = "write-refusal-recorded" // every refused executor write is evidence in the log
	CheckForgedRefused   = "forged-write-refused"   // a write without the lease secret is refused (lease.not-held), never accepted
	CheckAudit           = "audit-verify"           // domain/audit.Verify is clean
	CheckProviderDiff    = "audit-provider-diff"    // the provider's refunds and the ledger's completions agree (escalations aside)
	CheckNotApplied      = "not-applied-truthful"   // no execution is NotApplied whose own request created a refund
	CheckQuiescence      = "quiescence"             // once quiet, every execution is Completed, NotApplied or Escalated
	CheckLiveness        = "liveness"               // once the faults stop, the world is quiet within the bound
	CheckSignals         = "security-signal"        // every replay-suspected refusal reached the signals topic
	// A hostile flood (hostile-flood) never delays the lease holder: its
	// renewals and outcome under the flood succeed, no hostile
	// presentation is accepted or lands in an operation's stream.
	CheckHolderUnderFlood = "holder-under-flood"
	// After a lossy failover (store-failover-lossy):
	CheckRegressionNoticed = "regression-noticed"    // a cache ahead of its stream notices when it reads, and the regression is a LogRegressed in the log
	CheckLostEscalated     = "lost-effect-escalated" // every refund the provider made that no Completed execution accounts for is escalated
)

var setAsideQuery = setaside.Query{Limit: setaside.MaxListLimit}

// finalView is what the checks read: the store itself, no faults.
type finalView struct {
	events []eventstore.RecordedEvent
	ops    map[domain.OperationID]*domain.Operation
	ledger sim.Ledger
}

func (w *World) check(quiet bool) []Violation {
	var out []Violation
	fail := func(check, format string, args ...any) {
		if len(out) < 50 {
			out = append(out, Violation{Check: check, Detail: fmt.Sprintf(format, args...)})
		}
	}
	fv, err := w.readFinal()
	if err != nil {
		fail(CheckAudit, "cannot read the log: %v", err)
		return out
	}
	for _, rec := range fv.events {
		switch rec.Type {
		case domain.TypeLogRegressed:
			w.recordedRegressions++
		case domain.TypeLostEffectEscalated:
			w.escalatedLost++
		}
	}
	w.checkProvider(fv, fail)
	w.checkEvidence(fv, fail)
	w.checkHostile(fv, fail)
	w.checkRegressions(fv, fail)
	w.checkAudit(fv, fail)
	if quiet {
		w.checkQuiet(fv, fail)
	} else {
		fail(CheckLiveness, "not quiet %s (and %d steps) after the faults stopped: %s", SettleBound, MaxSettleSteps, w.busyness(fv))
	}
	return out
}

// visibleWait bounds how long a schedule's read of the global log waits
// for the events it cannot show yet (PostgreSQL holds back events behind
// any open transaction of the cluster, another schedule's included:
// heldBackStore).
const visibleWait = 30 * time.Second

func (w *World) readFinal() (*finalView, error) {
	fv := &finalView{ops: map[domain.OperationID]*domain.Operation{}, ledger: w.sim.Ledger()}
	// How many events there are, stream by stream (reading a stream is
	// never held back), then the global log until it shows them all.
	total := 0
	streams, err := unattributedStreams(w.ctx, w.inner)
	if err != nil {
		return nil, err
	}
	for _, a := range w.agents {
		streams = append(streams, a.op.StreamName(), domain.EvidenceStreamOf(a.op))
	}
	for _, st := range streams {
		for from := int64(0); ; {
			page, err := w.inner.ReadStream(w.ctx, st, from, 1000)
			if err != nil {
				return nil, err
			}
			total += len(page)
			if len(page) < 1000 {
				break
			}
			from += 1000
		}
	}
	// On PostgreSQL each read waits up to visibleWait for what another
	// transaction of the cluster holds back (heldBackStore).
	var after eventstore.Position
	for {
		page, err := w.inner.ReadAll(w.ctx, after, 1000)
		if err != nil {
			return nil, err
		}
		fv.events = append(fv.events, page...)
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].Position
	}
	if len(fv.events) < total {
		return nil, fmt.Errorf("the log shows %d of %d events after %s: a transaction of the cluster holds it back", len(fv.events), total, visibleWait)
	}
	h, err := ledger.New(ledger.Config{Store: w.inner, Clock: w.clock, Logger: w.log})
	if err != nil {
		return nil, err
	}
	for _, a := range w.agents {
		st, err := h.Load(w.ctx, a.op)
		if err != nil {
			return nil, err
		}
		fv.ops[a.op] = st
	}
	return fv, nil
}

// checkProvider: the simulator's ledger against the operations.
func (w *World) checkProvider(fv *finalView, fail func(string, string, ...any)) {
	w.checkRefunds(fv, fail)
	if fv.ledger.RequestsForgotten > 0 {
		return // the request log is incomplete: the checks on it would lie
	}
	for _, r := range fv.ledger.Requests {
		op := domain.OperationID(r.OperationID)
		st := fv.ops[op]
		if st == nil {
			fail(CheckWireKeys, "request %d for %q, an operation nobody requested", r.Seq, r.OperationID)
			continue
		}
		derived := w.lostKeys[keyOf{op, r.IdempotencyKey}] // a decision the store lost derived it
		for _, d := range st.Decisions {
			derived = derived || string(d.IdempotencyKey) == r.IdempotencyKey
		}
		if !derived {
			fail(CheckWireKeys, "%s: request %d carried key %q, which no decision of the operation derived", op, r.Seq, r.IdempotencyKey)
		}
	}
	execs := map[domain.ExecutionID]*domain.Execution{}
	for _, st := range fv.ops {
		for _, x := range st.Executions {
			execs[x.ID] = x
		}
	}
	for _, r := range fv.ledger.Requests {
		if r.RefundID == "" || r.Result == sim.ResultDeclined {
			continue // nothing moved (a refund committed as declined moves nothing)
		}
		if w.lostExecs[w.sentFor[r.Seq]] {
			continue // sent for an execution the store lost; another took its id
		}
		if x := execs[w.sentFor[r.Seq]]; x != nil && x.State == domain.ExecNotApplied {
			fail(CheckNotApplied, "%s: %s is NotApplied, but request %d sent for it under key %s created refund %s at %s",
				r.OperationID, x.ID, r.Seq, r.IdempotencyKey, r.RefundID, fmtOffset(r.ReceivedAt.Sub(Start)))
		}
	}
	var export bytes.Buffer
	if err := w.sim.WriteLedgerExport(&export); err != nil {
		fail(CheckProviderDiff, "export the provider's ledger: %v", err)
		return
	}
	reader, err := provider.ExportReader(w.profile.Name, &export)
	if err != nil {
		fail(CheckProviderDiff, "read the provider's export: %v", err)
		return
	}
	diff, err := audit.ProviderDiff(w.ctx, w.inner, reader)
	if err != nil {
		fail(CheckProviderDiff, "provider diff: %v", err)
		return
	}
	for _, c := range diff.UnknownToProvider {
		fail(CheckProviderDiff, "%s: %s Completed (%s), the provider shows no such refund: %s", c.Operation, c.Execution, c.ProviderReference, c.Why)
	}
	for _, m := range diff.Mismatches {
		fail(CheckProviderDiff, "%s: refund %s: %s", m.Operation, m.RefundID, m.Message)
	}
	lostEscalated := lostEffectsEscalated(fv)
	for _, u := range diff.UnknownToLedger {
		st := fv.ops[domain.OperationID(u.OperationID)]
		escalated := lostEscalated[u.RefundID] || lostEscalated[u.IdempotencyKey]
		if st != nil {
			for _, x := range st.Executions {
				escalated = escalated || x.State == domain.ExecEscalated
			}
		}
		switch {
		case escalated:
		case len(w.cuts) > 0:
			fail(CheckLostEscalated, "%s: refund %s (key %s) succeeded at the provider; after %d lossy failovers no Completed execution accounts for it and nothing escalated it: %s",
				u.OperationID, u.RefundID, u.IdempotencyKey, len(w.cuts), u.Why)
		default:
			fail(CheckProviderDiff, "%s: refund %s (key %s) succeeded at the provider; no Completed execution accounts for it and none is escalated: %s",
				u.OperationID, u.RefundID, u.IdempotencyKey, u.Why)
		}
	}
}

// evidence is what the log records of refusals: the presentations
// refused or found duplicate (by stream and message) and the executor
// writes refused.
type evidence struct {
	presented     map[evidenceKey]bool
	refusedWrites map[writeKey]bool
	// summarized holds the operation streams whose refusals past the
	// evidence bound were counted into a summary: a refusal not recorded
	// one by one is accounted for there (audit verify checks the counts).
	summarized map[string]bool
}

type evidenceKey struct {
	stream string
	msg    domain.MessageID
}

type writeKey struct {
	exec    domain.ExecutionID
	command string
	reason  domain.Reason
}

// unattributedStreams lists the unattributed evidence streams the store
// holds: the one of earlier builds and each day's.
func unattributedStreams(ctx context.Context, store eventstore.Store) ([]string, error) {
	out := []string{domain.EvidenceStream}
	hr, ok := store.(eventstore.HeadReader)
	if !ok {
		return nil, fmt.Errorf("simworld: the store lists no streams (%T)", store)
	}
	for after := domain.EvidenceStream; ; {
		heads, err := hr.ReadHeads(ctx, after, 100)
		if err != nil {
			return nil, err
		}
		for _, h := range heads {
			if !strings.HasPrefix(h.StreamID, domain.EvidenceStream+"-") {
				return out, nil
			}
			if domain.IsUnattributedStream(h.StreamID) {
				out = append(out, h.StreamID)
			}
		}
		if len(heads) < 100 {
			return out, nil
		}
		after = heads[len(heads)-1].StreamID
	}
}

// evidenceKey is where a refused presentation's evidence is recorded.
func (r seenRefusal) evidenceKey() evidenceKey {
	stream := r.op.StreamName()
	if r.reason == domain.ReasonOperationUnknown {
		stream = domain.EvidenceStream
	}
	return evidenceKey{stream, r.msg}
}

func (r seenWriteRefusal) evidenceKey() writeKey { return writeKey{r.exec, r.command, r.reason} }

// evidenceIn reads the evidence of refusals in events; forged is told of
// every executor event (its actor).
func evidenceIn(events []eventstore.RecordedEvent, forged ...func(rec eventstore.RecordedEvent, actor string)) evidence {
	ev := evidence{presented: map[evidenceKey]bool{}, refusedWrites: map[writeKey]bool{}, summarized: map[string]bool{}}
	for _, rec := range events {
		switch rec.Type {
		case domain.TypeDeliveryDuplicated, domain.TypePresentationRejected, domain.TypeWriteRefused, domain.TypeRefusalsSummarized,
			domain.TypeOutcomeRecorded, domain.TypeLateOutcomeRecorded, domain.TypeLeaseRenewed, domain.TypeOutcomeUnknown:
		default:
			continue
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			continue // audit-verify reports it
		}
		if op, inEvidence, ok := domain.OperationOfStream(rec.StreamID); ok && inEvidence {
			rec.StreamID = op.StreamName() // an operation's evidence stream is its own
		} else if domain.IsUnattributedStream(rec.StreamID) {
			rec.StreamID = domain.EvidenceStream // every day's unattributed stream is one place to the checks
		}
		switch e := d.Event.(type) {
		case domain.RefusalsSummarized:
			ev.summarized[rec.StreamID] = true
		case domain.DeliveryDuplicated:
			ev.presented[evidenceKey{rec.StreamID, e.MessageID}] = true
		case domain.PresentationRejected:
			ev.presented[evidenceKey{rec.StreamID, e.MessageID}] = true
		case domain.WriteRefused:
			ev.refusedWrites[writeKey{e.ExecutionID, e.Command, e.Reason}] = true
		default:
			for _, f := range forged {
				f(rec, d.Meta.Actor)
			}
		}
	}
	return ev
}

// checkEvidence: what the roles were refused is in the log.
func (w *World) checkEvidence(fv *finalView, fail func(string, string, ...any)) {
	ev := evidenceIn(fv.events, func(rec eventstore.RecordedEvent, actor string) {
		if actor == intruder {
			fail(CheckForgedRefused, "%s@%d: %s written by the intruder, who never held the lease", rec.StreamID, rec.Version, rec.Type)
		}
	})
	presented, refusedWrites := ev.presented, ev.refusedWrites
	for _, r := range w.obs.refusals {
		if k := r.evidenceKey(); !presented[k] && !ev.summarized[k.stream] {
			fail(CheckRefusalRecorded, "%s: %s of message %s (%s) is not recorded in %s", r.op, r.status, r.msg, r.reason, k.stream)
		}
	}
	for _, r := range w.obs.writeRefusals {
		if !refusedWrites[r.evidenceKey()] && !ev.summarized[r.op.StreamName()] {
			fail(CheckWriteRecorded, "%s: %s for %s refused (%s) but not recorded", r.op, r.command, r.exec, r.reason)
		}
	}
	for _, f := range w.obs.forged {
		var r *domain.Refusal
		switch {
		case f.err == nil:
			fail(CheckForgedRefused, "%s: a write for %s without its lease secret was accepted", f.op, f.exec)
		case asRefusal(f.err, &r) && r.Reason != domain.ReasonLeaseNotHeld:
			fail(CheckForgedRefused, "%s: a write for %s without its lease secret was refused %s, not %s", f.op, f.exec, r.Reason, domain.ReasonLeaseNotHeld)
		}
	}
}

func (w *World) checkAudit(fv *finalView, fail func(string, string, ...any)) {
	rep, err := audit.Verify(w.ctx, w.inner, audit.VerifyOptions{})
	if err != nil {
		fail(CheckAudit, "audit verify could not finish: %v", err)
		return
	}
	for _, v := range rep.Violations {
		fail(CheckAudit, "%s %s %s@%d (%s): %s", v.Invariant, v.Operation, v.Stream, v.Version, v.Event, v.Message)
	}
	if !rep.Complete {
		fail(CheckAudit, "audit verify did not read the whole log")
	}
}

// checkQuiet: at quiescence nothing is left open.
func (w *World) checkQuiet(fv *finalView, fail func(string, string, ...any)) {
	for _, a := range w.agents {
		st := fv.ops[a.op]
		for _, x := range st.Executions {
			switch x.State {
			case domain.ExecCompleted, domain.ExecNotApplied, domain.ExecEscalated:
			default:
				fail(CheckQuiescence, "%s: %s is %s at quiescence", a.op, x.ID, x.State)
			}
		}
	}
	signals := map[string]bool{}
	for _, s := range w.transport.signals {
		signals[s.MessageID] = true
	}
	for _, rec := range fv.events {
		if rec.Type != domain.TypePresentationRejected {
			continue
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			continue
		}
		if ev := d.Event.(domain.PresentationRejected); ev.ReplaySuspected && !signals[transport.SignalIDForEvent(rec.ID)] {
			fail(CheckSignals, "%s@%d: replay suspected on %s, and no security signal was published", rec.StreamID, rec.Version, ev.MessageID)
		}
	}
}

// busyness says what keeps the world from being quiet.
func (w *World) busyness(fv *finalView) string {
	var parts []string
	for _, a := range w.agents {
		if !a.done {
			parts = append(parts, fmt.Sprintf("%s is %s", a.op, fv.ops[a.op].Status()))
		}
	}
	for _, m := range w.transport.msgs {
		if m.state == msgReady || m.state == msgInFlight {
			parts = append(parts, "message "+m.out.MessageID+" not settled")
		}
	}
	for _, t := range w.s.live() {
		if pk := t.park; pk != nil && pk.ready == nil {
			parts = append(parts, fmt.Sprintf("%s waits at %s", t, pk.label))
		}
	}
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("and %d more", len(parts)-8))
	}
	slices.Sort(parts)
	return fmt.Sprint(parts)
}

// digestLog adds the final log (stream, version, type of every event) and
// the provider's counters to the trace hash.
func (w *World) digestLog() {
	events, err := w.readFinal()
	if err != nil {
		return
	}
	for _, rec := range events.events {
		fmt.Fprintf(w.trace, "%s@%d %s\n", rec.StreamID, rec.Version, rec.Type)
	}
	fmt.Fprintf(w.trace, "provider %d requests %d refunds %d lookups\n",
		events.ledger.RequestsReceived, events.ledger.RefundsCreated, events.ledger.Lookups)
}

// checkRefunds: at most one refund per operation; after a lossy failover,
// at most one inside the provider's key retention (past it, a key the
// store lost is a new request to the provider: the escalation of the
// first is what a person acts on).
func (w *World) checkRefunds(fv *finalView, fail func(string, string, ...any)) {
	lossy := len(w.cuts) > 0 && fv.ledger.RequestsForgotten == 0
	lostEscalated := lostEffectsEscalated(fv)
	created := map[string][]sim.ReceivedRequest{}
	seen := map[string]bool{}
	for _, r := range fv.ledger.Requests {
		if r.RefundID == "" || r.Result == sim.ResultDeclined || seen[r.RefundID] {
			continue
		}
		seen[r.RefundID] = true
		created[r.OperationID] = append(created[r.OperationID], r)
	}
	for _, a := range w.agents {
		n := fv.ledger.ByOperation[string(a.op)].RefundsCreated
		if n <= 1 {
			continue
		}
		if !lossy {
			fail(CheckRefunds, "%s: %d refunds created at the provider", a.op, n)
			continue
		}
		rs := created[string(a.op)]
		for i := 1; i < len(rs); i++ {
			gap := rs[i].ReceivedAt.Sub(rs[i-1].ReceivedAt)
			if gap >= w.profile.KeyRetention && w.profile.KeyRetention > 0 {
				continue
			}
			if lostEscalated[rs[i-1].RefundID] || lostEscalated[rs[i].RefundID] ||
				lostEscalated[rs[i-1].IdempotencyKey] || lostEscalated[rs[i].IdempotencyKey] { // an Unknown escalated by its key
				// Finding 4 (docs/simulation.md): counted, not failed, while
				// one of the two is escalated to a person.
				w.secondRefunds = append(w.secondRefunds, fmt.Sprintf("%s: refunds %s and %s created %s apart, inside %s's key retention (%s); one escalated",
					a.op, rs[i-1].RefundID, rs[i].RefundID, gap, w.profile.Name, w.profile.KeyRetention))
				continue
			}
			fail(CheckRefunds, "%s: refunds %s and %s created %s apart, inside %s's key retention (%s), neither escalated",
				a.op, rs[i-1].RefundID, rs[i].RefundID, gap, w.profile.Name, w.profile.KeyRetention)
		}
	}
}

// lostEffectsEscalated are the provider references and keys that a
// LostEffectEscalated names, in an operation's stream or the unattributed
// evidence stream.
func lostEffectsEscalated(fv *finalView) map[string]bool {
	out := map[string]bool{}
	for _, rec := range fv.events {
		if rec.Type != domain.TypeLostEffectEscalated {
			continue
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			continue
		}
		if ev, ok := d.Event.(domain.LostEffectEscalated); ok {
			out[ev.ProviderReference] = ev.ProviderReference != ""
			out[string(ev.IdempotencyKey)] = ev.IdempotencyKey != ""
		}
	}
	delete(out, "")
	return out
}

// checkRegressions: the API's state cache noticed every stream it was
// ahead of when it read it, and every regression the API noticed is a
// LogRegressed in the log (unless a later lossy failover took it too).
func (w *World) checkRegressions(fv *finalView, fail func(string, string, ...any)) {
	for _, u := range w.obs.unnoticed {
		fail(CheckRegressionNoticed, "%s: at %s the API's state cache held version %d (event %s), the store held %d, and reading it noticed nothing",
			u.op, fmtOffset(u.at.Sub(Start)), u.seen, u.anchorID, u.held)
	}
	recorded := map[string]bool{}
	for _, rec := range fv.events {
		if rec.StreamID != domain.RegressionStream || rec.Type != domain.TypeLogRegressed {
			continue
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			continue
		}
		if ev, ok := d.Event.(domain.LogRegressed); ok {
			recorded[ev.Stream] = true
		}
	}
	for _, n := range w.obs.notices {
		if n.proc == w.apiProc.name && n.cuts == len(w.cuts) && !recorded[n.stream] {
			fail(CheckRegressionNoticed, "the API's %s noticed %s go back at %s; no LogRegressed records it", n.cache, n.stream, fmtOffset(n.at.Sub(Start)))
		}
	}
}
