package audit

import (
	"context"
	"time"

	"opledger/domain"
	"opledger/eventstore"
)

// The checks on evidence streams (invariant 14, I14): an operation's
// evidence stream ("evidence-OP-…") and the unattributed ones hold
// evidence only; a refusal is recorded one by one only while its key and
// its stream are within the bound of its window, and a summary counts
// refusals only past it, accounting for each of them exactly: its reasons
// and principals add up to its count, its samples and principals are within
// their bounds, its times within its window. Every refusal is counted in
// the report (Refusals), one by one or by summary.

// evidenceStream is what the audit keeps of one evidence stream: the last
// version met and the bound's counts (the command handler's own fold).
type evidenceStream struct {
	version int64
	log     *domain.EvidenceLog
}

// evidenceLog returns the state of the operation's evidence stream,
// creating it at its first event.
func (st *operationState) evidenceLog(v *verifier, stream string) *domain.EvidenceLog {
	if st.evidence == nil {
		st.evidence = &evidenceStream{version: -1, log: domain.NewEvidenceLog(stream, v.opts.EvidenceBound)}
	}
	return st.evidence.log
}

// operationEvidence checks one event of operation op's evidence stream: its
// version follows the stream's, it is evidence, and it is checked and
// folded as the operation's event it is (I7, S4) and against the bound.
func (v *verifier) operationEvidence(_ context.Context, rec *eventstore.RecordedEvent, d decodedEvent, op domain.OperationID, st *operationState) error {
	v.seq++
	v.rec, v.op, v.st, v.meta = rec, op, st, domain.Metadata{}
	log := st.evidenceLog(v, rec.StreamID)
	v.evidenceVersion(rec, &st.evidence.version)
	if d.err != nil {
		v.emit(S2Decodable, nil, "cannot decode: %v", d.err)
		return nil
	}
	v.meta = d.meta
	if !domain.IsEvidence(d.event) {
		v.emit(S2Decodable, nil, "an evidence stream holds evidence only, not %s", rec.Type)
		return nil
	}
	v.oneByOne(d.event, log)
	v.applyEvent(rec, d.event)
	return nil
}

// evidence checks an event of an unattributed evidence stream: the single
// stream of earlier builds holds refused presentations only, recorded
// without a bound; a day's stream holds them within the bound, and
// summaries.
func (v *verifier) evidence(ctx context.Context, rec *eventstore.RecordedEvent, d decodedEvent) error {
	v.seq++
	v.rec, v.op, v.st, v.meta = rec, "", nil, domain.Metadata{}
	es := v.unattributed[rec.StreamID]
	if es == nil {
		es = &evidenceStream{version: -1, log: domain.NewEvidenceLog(rec.StreamID, v.opts.EvidenceBound)}
		v.unattributed[rec.StreamID] = es
		if v.opts.From != nil && rec.Version > 0 {
			if err := v.primeUnattributed(ctx, rec.StreamID, es); err != nil {
				return err
			}
		}
	}
	if v.opts.From == nil && es.version < 0 && rec.Version != 0 {
		v.emit(S1VersionsContiguous, nil, "version %d is the first of the stream: versions 0..%d are missing from the log", rec.Version, rec.Version-1)
		es.version = rec.Version - 1
	}
	v.evidenceVersion(rec, &es.version)
	if d.err != nil {
		v.emit(S2Decodable, nil, "cannot decode: %v", d.err)
		return nil
	}
	v.meta = d.meta
	legacy := rec.StreamID == domain.EvidenceStream
	switch ev := d.event.(type) {
	case domain.PresentationRejected:
		if !legacy {
			v.oneByOne(ev, es.log)
		}
		v.refusalFields(ev)
		v.countRefusal(ev, 1)
	case domain.LostEffectEscalated:
		if ev.ExecutionID != "" {
			v.emit(S2Decodable, nil, "a lost effect in an unattributed evidence stream opens execution %s of no operation", ev.ExecutionID)
		}
	case domain.RefusalsSummarized:
		if legacy {
			v.emit(S2Decodable, nil, "the unattributed stream of earlier builds holds only PresentationRejected, not %s", rec.Type)
			return nil
		}
		v.summarized(ev, es.log)
	default:
		v.emit(S2Decodable, nil, "an unattributed evidence stream holds only PresentationRejected, RefusalsSummarized and LostEffectEscalated, not %s", rec.Type)
	}
	return nil
}

// primeUnattributed folds an unattributed stream's events before From into
// its state, silently.
func (v *verifier) primeUnattributed(ctx context.Context, stream string, es *evidenceStream) error {
	v.silent = true
	defer func() { v.silent = false }()
	return v.primeStream(ctx, stream, func(rec *eventstore.RecordedEvent) error {
		es.version = rec.Version
		if d := decode(rec); d.err == nil && d.event != nil {
			_ = es.log.Evolve(d.event) // a stray type is reported when met in range, not here
		}
		return nil
	})
}

// evidenceVersion checks that rec follows the evidence stream's last
// version (S1) and moves it.
func (v *verifier) evidenceVersion(rec *eventstore.RecordedEvent, last *int64) {
	if rec.Version != *last+1 {
		v.emit(S1VersionsContiguous, nil, "version %d follows version %d", rec.Version, *last)
	}
	*last = max(*last, rec.Version)
}

// oneByOne checks a refusal recorded one by one against the bound of its
// window (I14), folds it into the stream's counts and counts it.
func (v *verifier) oneByOne(e domain.Event, log *domain.EvidenceLog) {
	key, at, ok := domain.EvidenceKeyOf(e, log.Unattributed)
	if !ok {
		return
	}
	if admitted, _, window := log.Admit(key, at); !admitted {
		perKey, total, _ := log.Recorded(key, window)
		b := log.Bound()
		v.emit(I14EvidenceBounded, nil, "%s recorded one by one past the bound: %s had %d (bound %d) and the stream %d (bound %d) in the window from %s",
			e.EventType(), key, perKey, b.PerKey, total, b.PerStream, stamp(window))
	}
	_ = log.Evolve(e) // e is a refusal: Evolve refuses only other types
}

// refusalReason is a refusal's reason code.
func refusalReason(e domain.Event) domain.Reason {
	switch ev := e.(type) {
	case domain.PresentationRejected:
		return ev.Reason
	case domain.DeliveryDuplicated:
		return domain.ReasonDeliveryDuplicate
	case domain.WriteRefused:
		return ev.Reason
	}
	return ""
}

// countRefusal counts refusal e in the report.
func (v *verifier) countRefusal(e domain.Event, n int64) {
	v.countReason(string(refusalReason(e)), n)
}

// countReason adds n refusals of reason to the report.
func (v *verifier) countReason(reason string, n int64) {
	if v.silent {
		return
	}
	r := &v.report.Refusals
	if r.ByReason == nil {
		r.ByReason = map[string]int64{}
	}
	r.ByReason[reason] += n
	r.Total += n
}

// summarized checks a summary against the bound and against itself (I14),
// and counts what it counts.
func (v *verifier) summarized(ev domain.RefusalsSummarized, log *domain.EvidenceLog) {
	b := log.Bound()
	if !v.silent {
		v.report.Refusals.Summaries++
		v.report.Refusals.Summarized += max(ev.Count, 0)
	}
	for _, rc := range ev.Reasons {
		v.countReason(string(rc.Reason), max(rc.Count, 0))
	}
	switch {
	case !ev.Scope.Valid():
		v.emit(I14EvidenceBounded, nil, "summary of unknown scope %q", clipText(string(ev.Scope)))
		return
	case ev.Count < 1:
		v.emit(I14EvidenceBounded, nil, "summary counts %d refusals: a summary counts at least one", ev.Count)
		return
	case ev.BoundPerKey != b.PerKey || ev.BoundPerStream != b.PerStream || !ev.WindowEnd.Equal(ev.WindowStart.Add(b.Window)) || !ev.WindowStart.Equal(b.WindowOf(ev.WindowStart)):
		v.emit(I14EvidenceBounded, nil, "summary states bound %d per key, %d per stream, window %s to %s; the ledger's is %d, %d, %s windows",
			ev.BoundPerKey, ev.BoundPerStream, stamp(ev.WindowStart), stamp(ev.WindowEnd), b.PerKey, b.PerStream, b.Window)
	}
	var reasons, principals int64
	for _, rc := range ev.Reasons {
		reasons += rc.Count
	}
	for _, p := range ev.Principals {
		principals += p.Count
	}
	if reasons != ev.Count || principals+ev.OtherPrincipals != ev.Count {
		v.emit(I14EvidenceBounded, nil, "summary counts %d refusals, but its reasons add up to %d and its principals to %d", ev.Count, reasons, principals+ev.OtherPrincipals)
	}
	if len(ev.Principals) > domain.MaxSummaryPrincipals || int64(len(ev.Samples)) > min(ev.Count, domain.MaxSummarySamples) {
		v.emit(I14EvidenceBounded, nil, "summary names %d principals and keeps %d samples (at most %d and %d)", len(ev.Principals), len(ev.Samples), domain.MaxSummaryPrincipals, domain.MaxSummarySamples)
	}
	key := domain.EvidenceKey{Scope: ev.Scope, ID: ev.ScopeID}
	// A refusal counts in its own window, or, when that window is not one
	// the stream keeps (a clock that went back or leapt, a batch recorded
	// late), in a kept one (domain.EvidenceLog.Admit): a summary may hold
	// such a refusal outside its window, never one of another kept window.
	counted := func(t time.Time) bool {
		if !t.Before(ev.WindowStart) && t.Before(ev.WindowEnd) {
			return true
		}
		_, _, kept := log.Recorded(key, b.WindowOf(t))
		return !kept
	}
	if ev.LastAt.Before(ev.FirstAt) || !counted(ev.FirstAt) || !counted(ev.LastAt) {
		v.emit(I14EvidenceBounded, nil, "summary's refusals from %s to %s are not within its window %s to %s", stamp(ev.FirstAt), stamp(ev.LastAt), stamp(ev.WindowStart), stamp(ev.WindowEnd))
	}
	perKey, total, _ := log.Recorded(key, ev.WindowStart)
	switch past, kept := log.PastBound(key, ev.WindowStart); {
	case !kept:
		// recorded after its window left the ones kept: not judged
	case past:
	case ev.Scope == domain.ScopeStream:
		v.emit(I14EvidenceBounded, nil, "summary of the stream's refusals while the stream had %d recorded one by one in its window (bound %d)", total, b.PerStream)
	default:
		v.emit(I14EvidenceBounded, nil, "summary of %s while it had %d recorded one by one in its window (bound %d): refusals within the bound are recorded one by one", key, perKey, b.PerKey)
	}
}
