package simworld

import (
	"bytes"
	"fmt"
	"slices"
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
	w.checkProvider(fv, fail)
	w.checkEvidence(fv, fail)
	w.checkAudit(fv, fail)
	if quiet {
		w.checkQuiet(fv, fail)
	} else {
		fail(CheckLiveness, "not quiet %s (and %d steps) after the faults stopped: %s", SettleBound, MaxSettleSteps, w.busyness(fv))
	}
	return out
}

// visibleWait bounds how long the checks wait for the whole log to be
// readable in global order (PostgreSQL holds back events behind any open
// transaction of the cluster, another schedule's included).
const visibleWait = 30 * time.Second

func (w *World) readFinal() (*finalView, error) {
	fv := &finalView{ops: map[domain.OperationID]*domain.Operation{}, ledger: w.sim.Ledger()}
	// How many events there are, stream by stream (reading a stream is
	// never held back), then the global log until it shows them all.
	total := 0
	streams := []string{domain.EvidenceStream}
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
	deadline := time.Now().Add(visibleWait)
	for {
		fv.events = fv.events[:0]
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
		if len(fv.events) >= total || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // another transaction of the cluster holds the log back: poll, bounded by visibleWait
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
	for _, a := range w.agents {
		if n := fv.ledger.ByOperation[string(a.op)].RefundsCreated; n > 1 {
			fail(CheckRefunds, "%s: %d refunds created at the provider", a.op, n)
		}
	}
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
		derived := false
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
	for _, u := range diff.UnknownToLedger {
		st := fv.ops[domain.OperationID(u.OperationID)]
		escalated := false
		if st != nil {
			for _, x := range st.Executions {
				escalated = escalated || x.State == domain.ExecEscalated
			}
		}
		if !escalated {
			fail(CheckProviderDiff, "%s: refund %s (key %s) succeeded at the provider; no Completed execution accounts for it and none is escalated: %s",
				u.OperationID, u.RefundID, u.IdempotencyKey, u.Why)
		}
	}
}

// checkEvidence: what the roles were refused is in the log.
func (w *World) checkEvidence(fv *finalView, fail func(string, string, ...any)) {
	type key struct {
		stream string
		msg    domain.MessageID
	}
	presented := map[key]bool{}
	type wkey struct {
		exec    domain.ExecutionID
		command string
		reason  domain.Reason
	}
	refusedWrites := map[wkey]bool{}
	// Streams whose refusals past the evidence bound were counted into a
	// summary: a refusal not recorded one by one is accounted for there
	// (audit verify checks the counts).
	summarized := map[string]bool{}
	for _, rec := range fv.events {
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
		if op, evidence, ok := domain.OperationOfStream(rec.StreamID); ok && evidence {
			rec.StreamID = op.StreamName() // an operation's evidence is its own
		}
		switch ev := d.Event.(type) {
		case domain.RefusalsSummarized:
			summarized[rec.StreamID] = true
		case domain.DeliveryDuplicated:
			presented[key{rec.StreamID, ev.MessageID}] = true
		case domain.PresentationRejected:
			presented[key{rec.StreamID, ev.MessageID}] = true
		case domain.WriteRefused:
			refusedWrites[wkey{ev.ExecutionID, ev.Command, ev.Reason}] = true
		default:
			if d.Meta.Actor == intruder {
				fail(CheckForgedRefused, "%s@%d: %s written by the intruder, who never held the lease", rec.StreamID, rec.Version, rec.Type)
			}
		}
	}
	for _, r := range w.obs.refusals {
		stream := r.op.StreamName()
		if r.reason == domain.ReasonOperationUnknown {
			stream = domain.EvidenceStream
		}
		if !presented[key{stream, r.msg}] && !summarized[stream] {
			fail(CheckRefusalRecorded, "%s: %s of message %s (%s) is not recorded in %s", r.op, r.status, r.msg, r.reason, stream)
		}
	}
	for _, r := range w.obs.writeRefusals {
		if !refusedWrites[wkey{r.exec, r.command, r.reason}] && !summarized[r.op.StreamName()] {
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
