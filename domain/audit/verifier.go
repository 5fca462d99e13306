package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"opledger/domain"
	"opledger/eventstore"
)

// verifier is one Verify run's state.
type verifier struct {
	store  eventstore.Store
	opts   VerifyOptions
	hash   hasher
	ops    map[string]*operationState // by stream name
	openOp int                        // operations with an open execution
	// evidenceVersion is the last version seen of domain.EvidenceStream.
	evidenceVersion int64
	evidenceSeen    bool
	seq             int64 // events checked or primed, in order
	report          Report

	// The event being checked.
	rec    *eventstore.RecordedEvent
	meta   domain.Metadata
	op     domain.OperationID
	st     *operationState
	silent bool // priming: apply, report nothing
}

func newVerifier(store eventstore.Store, opts VerifyOptions) *verifier {
	v := &verifier{
		store: store, opts: opts, hash: newHasher(), ops: map[string]*operationState{}, evidenceVersion: -1,
		report: Report{From: positionText(opts.From), To: positionText(opts.To), ByInvariant: map[string]int64{}},
	}
	return v
}

// check checks one event of the range and folds it into the state.
func (v *verifier) check(ctx context.Context, rec *eventstore.RecordedEvent) error {
	v.report.Events++
	v.report.Last = rec.Position.String()
	op, isOperation := domain.OperationIDFromStream(rec.StreamID)
	switch {
	case isOperation:
		v.report.OperationEvents++
	case rec.StreamID == domain.EvidenceStream:
		v.report.EvidenceEvents++
		v.evidence(rec)
		return nil
	default:
		v.report.OtherEvents++
		return nil
	}
	st := v.ops[rec.StreamID]
	if st == nil {
		if len(v.ops) >= v.opts.MaxOperations {
			return fmt.Errorf("verify: %w: more than %d operations (MaxOperations) at %s: verify a narrower range", ErrLimitExceeded, v.opts.MaxOperations, rec.Position)
		}
		st = newOperationState()
		v.ops[rec.StreamID] = st
		v.report.Operations++
		if v.opts.From != nil && rec.Version > 0 {
			if err := v.prime(ctx, rec.StreamID, op, st, rec.Version); err != nil {
				return err
			}
		}
	}
	v.apply(rec, op, st)
	if v.openOp > v.opts.MaxOpenOperations {
		return fmt.Errorf("verify: %w: more than %d operations with an open execution (MaxOpenOperations) at %s", ErrLimitExceeded, v.opts.MaxOpenOperations, rec.Position)
	}
	return nil
}

// prime folds versions 0..upTo-1 of a stream first met after From into its
// state, silently: they are outside the range, but the range's events must
// be judged with their history. The stream's own order is the global order
// of its events, so all of them lie at or before From.
func (v *verifier) prime(ctx context.Context, stream string, op domain.OperationID, st *operationState, upTo int64) error {
	for next := int64(0); next < upTo; {
		page, err := v.store.ReadStream(ctx, stream, next, int(min(int64(v.opts.PageSize), upTo-next)))
		if err != nil {
			return fmt.Errorf("verify: read the history of %s before the range: %w", stream, err)
		}
		if len(page) == 0 {
			return nil // shorter than its first event in range says: S1 will report the gap
		}
		v.silent = true
		for i := range page {
			v.apply(&page[i], op, st)
			v.report.PrimedEvents++
		}
		v.silent = false
		next = page[len(page)-1].Version + 1
	}
	return nil
}

// apply checks one operation event and folds it into st.
func (v *verifier) apply(rec *eventstore.RecordedEvent, op domain.OperationID, st *operationState) {
	v.seq++
	v.rec, v.op, v.st, v.meta = rec, op, st, domain.Metadata{}
	if rec.Version != st.version+1 {
		if rec.Version <= st.version {
			v.emit(S1VersionsContiguous, nil, "version %d follows version %d: a version repeats or runs backwards", rec.Version, st.version)
		} else {
			v.emit(S1VersionsContiguous, nil, "version %d follows version %d: versions %d..%d are missing from the log", rec.Version, st.version, st.version+1, rec.Version-1)
		}
	}
	st.version = max(st.version, rec.Version)
	meta, e, err := decode(rec)
	if err != nil {
		v.emit(S2Decodable, nil, "cannot decode: %v", err)
		return
	}
	v.meta = meta
	if r, ok := e.(domain.OperationRequested); ok {
		v.requested(r)
		return
	}
	if !st.requested && !st.unrequested {
		st.unrequested = true
		v.emit(S3RequestedFirst, nil, "%s before the operation's OperationRequested", rec.Type)
	}
	switch ev := e.(type) {
	case domain.Decided:
		v.decided(ev)
	case domain.CapabilityIssued:
		v.capabilityIssued(ev)
	case domain.CapabilityRevoked:
		v.capabilityRevoked(ev)
	case domain.Claimed:
		v.claimed(ev)
	case domain.DeliveryDuplicated:
		v.deliveryDuplicated(ev)
	case domain.PresentationRejected:
		v.presentationRejected(ev)
	case domain.LeaseRenewed:
		v.leaseRenewed(ev)
	case domain.OutcomeRecorded:
		v.outcomeRecorded(ev)
	case domain.OutcomeUnknown:
		v.outcomeUnknown(ev)
	case domain.LeaseLapsed:
		v.leaseLapsed(ev)
	case domain.LateOutcomeRecorded:
		v.lateOutcomeRecorded(ev)
	case domain.Reconciled:
		v.reconciled(ev)
	case domain.Escalated:
		v.escalated(ev)
	case domain.WriteRefused:
		v.execution(ev.ExecutionID)
	default:
		v.emit(S2Decodable, nil, "event type %s is not one this audit knows", rec.Type)
	}
}

// decode is ledger.DecodeRecorded's composition (metadata, then the event
// under the metadata's schema version), keeping the metadata, which the
// checks read too, so that it is parsed once.
func decode(rec *eventstore.RecordedEvent) (domain.Metadata, domain.Event, error) {
	meta, err := domain.DecodeMetadata(rec.Metadata)
	if err != nil {
		return domain.Metadata{}, nil, err
	}
	e, err := domain.DecodeEvent(rec.Type, meta.SchemaVersion, rec.Data)
	if err != nil {
		return domain.Metadata{}, nil, err
	}
	return meta, e, nil
}

// evidence checks an event of the unattributed evidence stream.
func (v *verifier) evidence(rec *eventstore.RecordedEvent) {
	v.seq++
	v.rec, v.op, v.st = rec, "", nil
	if v.evidenceSeen && rec.Version != v.evidenceVersion+1 || !v.evidenceSeen && v.opts.From == nil && rec.Version != 0 {
		v.emit(S1VersionsContiguous, nil, "version %d follows version %d", rec.Version, v.evidenceVersion)
	}
	v.evidenceSeen, v.evidenceVersion = true, max(v.evidenceVersion, rec.Version)
	meta, e, err := decode(rec)
	if err != nil {
		v.emit(S2Decodable, nil, "cannot decode: %v", err)
		return
	}
	v.meta = meta
	ev, ok := e.(domain.PresentationRejected)
	if !ok {
		v.emit(S2Decodable, nil, "the evidence stream holds only PresentationRejected, not %s", rec.Type)
		return
	}
	v.refusalFields(ev)
}

// emit records a violation by the event being checked.
func (v *verifier) emit(inv Invariant, related []int64, format string, args ...any) {
	if v.silent {
		return
	}
	v.report.ViolationCount++
	v.report.ByInvariant[inv.ID]++
	if len(v.report.Violations) >= v.opts.MaxViolations {
		return
	}
	v.report.Violations = append(v.report.Violations, Violation{
		Invariant: inv.ID, Name: inv.Name, Operation: v.op, Stream: v.rec.StreamID, Position: v.rec.Position.String(),
		Version: v.rec.Version, Event: v.rec.Type, Related: related, Message: fmt.Sprintf(format, args...),
	})
}

// setState moves x to state to, keeping the counters (executions by state,
// open and blocking executions, open operations) and dropping x's strings
// when it ends.
func (v *verifier) setState(x *execRec, to execState) {
	st, from := v.st, x.state
	x.version = v.rec.Version
	if from == to {
		return
	}
	if from != 0 {
		v.report.Executions.add(from, -1)
	}
	v.report.Executions.add(to, 1)
	x.state = to
	if from.open() != to.open() {
		if to.open() {
			st.openExecs++
			if st.openExecs == 1 {
				v.openOp++
				v.report.OpenOperationsPeak = max(v.report.OpenOperationsPeak, v.openOp)
			}
		} else {
			st.openExecs--
			if st.openExecs == 0 {
				v.openOp--
			}
		}
	}
	if from.blocks() && from != 0 {
		st.blockingExec--
	}
	if to.blocks() {
		st.blockingExec++
	}
	if !to.open() {
		x.id, x.unknown = "", nil
	}
}

// becameUnknown records how and where x became Unknown (for the listing).
func (v *verifier) becameUnknown(x *execRec, id domain.ExecutionID, at time.Time) {
	if x.id == "" {
		x.id = id // a closed execution reopened by a violation: it is open again
	}
	x.unknown = &unknownSince{seq: v.seq, position: v.rec.Position.String(), version: v.rec.Version, at: at.UTC(), via: v.rec.Type}
}

// finish lists the open Unknowns and marks the report complete.
func (v *verifier) finish() Report {
	var open []OpenUnknown
	var seqs []int64
	for stream, st := range v.ops {
		if st.openExecs == 0 {
			continue
		}
		op, _ := domain.OperationIDFromStream(stream)
		for i := range st.execs.vals {
			x := &st.execs.vals[i]
			if !x.state.unknownish() || x.unknown == nil {
				continue
			}
			v.report.OpenUnknownCount++
			open = append(open, OpenUnknown{
				Operation: op, Execution: x.id, State: execStateNames[x.state], Since: x.unknown.at,
				Via: x.unknown.via, Position: x.unknown.position, Version: x.unknown.version,
			})
			seqs = append(seqs, x.unknown.seq)
		}
	}
	order := make([]int, len(open))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(seqs[a], seqs[b]) })
	n := min(len(order), v.opts.MaxListedUnknowns)
	v.report.OpenUnknowns = make([]OpenUnknown, 0, n)
	for _, i := range order[:n] {
		v.report.OpenUnknowns = append(v.report.OpenUnknowns, open[i])
	}
	v.report.Complete = true
	return v.report
}
