package audit

import (
	"container/heap"
	"context"
	"fmt"
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
	// unattributed are the unattributed evidence streams met, by name.
	unattributed map[string]*evidenceStream
	seq          int64 // events checked or primed, in order
	last         eventstore.Position
	report       Report
	// boundSeen: a claim carrying a lease secret digest was met (the log was
	// written by a version that binds leases to their holder from there on).
	boundSeen bool
	// unhandled counts events of a type apply has no case for (Checks).
	unhandled int64

	// checked is the event check last took through an operation's state,
	// that state and whether the event is of its evidence stream: the chain
	// check of the same event finds its chain state there (chainChecker.slotOf).
	checked         *eventstore.RecordedEvent
	checkedOp       *operationState
	checkedEvidence bool

	// The event being checked.
	rec    *eventstore.RecordedEvent
	meta   domain.Metadata
	op     domain.OperationID
	st     *operationState
	silent bool // priming: apply, report nothing
}

func newVerifier(store eventstore.Store, opts VerifyOptions) *verifier {
	v := &verifier{
		store: store, opts: opts, hash: newHasher(), ops: map[string]*operationState{}, unattributed: map[string]*evidenceStream{},
		report: Report{From: positionText(opts.From), To: positionText(opts.To), ByInvariant: map[string]int64{}},
	}
	return v
}

// check checks one event of the range and folds it into the state.
func (v *verifier) check(ctx context.Context, rec *eventstore.RecordedEvent, d decodedEvent) error {
	v.report.Events++
	v.last = rec.Position
	v.checked, v.checkedOp = nil, nil
	if d.ignored != "" {
		v.ignoredMember(rec, d.ignored)
	}
	op, isEvidence, isOperation := domain.OperationOfStream(rec.StreamID)
	switch {
	case isOperation && isEvidence:
		v.report.OperationEvidenceEvents++
	case isOperation:
		v.report.OperationEvents++
	case domain.IsUnattributedStream(rec.StreamID):
		v.report.EvidenceEvents++
		return v.evidence(ctx, rec, d)
	default:
		v.report.OtherEvents++
		return nil
	}
	name := rec.StreamID // the operation's stream: op.StreamName()
	if isEvidence {
		name = op.StreamName()
	}
	st := v.ops[name]
	if st == nil {
		if len(v.ops) >= v.opts.MaxOperations {
			return fmt.Errorf("verify: %w: more than %d operations (MaxOperations) at %s: verify a narrower range", ErrLimitExceeded, v.opts.MaxOperations, rec.Position)
		}
		st = newOperationState()
		v.ops[name] = st
		v.report.Operations++
		if v.opts.From != nil && (isEvidence || rec.Version > 0) {
			if err := v.primeOperation(ctx, op, st); err != nil {
				return err
			}
		}
	}
	v.checked, v.checkedOp, v.checkedEvidence = rec, st, isEvidence
	if isEvidence {
		if err := v.operationEvidence(ctx, rec, d, op, st); err != nil {
			return err
		}
	} else {
		v.apply(rec, d, op, st)
	}
	if v.openOp > v.opts.MaxOpenOperations {
		return fmt.Errorf("verify: %w: more than %d operations with an open execution (MaxOpenOperations) at %s", ErrLimitExceeded, v.opts.MaxOpenOperations, rec.Position)
	}
	return nil
}

// primeOperation folds the history before From of an operation first met
// in the range — its stream's events and its evidence stream's, silently —
// into its state: they are outside the range, but the range's events must
// be judged with their history. A stream's own order is the global order of
// its events, so its events before the range are those at or before From.
func (v *verifier) primeOperation(ctx context.Context, op domain.OperationID, st *operationState) error {
	v.silent = true
	defer func() { v.silent = false }()
	err := v.primeStream(ctx, op.StreamName(), func(rec *eventstore.RecordedEvent) error {
		v.apply(rec, decode(rec), op, st)
		return nil
	})
	if err != nil {
		return err
	}
	return v.primeStream(ctx, domain.EvidenceStreamOf(op), func(rec *eventstore.RecordedEvent) error {
		return v.operationEvidence(ctx, rec, decode(rec), op, st)
	})
}

// primeStream reads stream from its start up to From and hands each event
// to fold, counting them as primed.
func (v *verifier) primeStream(ctx context.Context, stream string, fold func(*eventstore.RecordedEvent) error) error {
	for next := int64(0); ; {
		page, err := v.store.ReadStream(ctx, stream, next, v.opts.PageSize)
		if err != nil {
			return fmt.Errorf("verify: read the history of %s before the range: %w", stream, err)
		}
		for i := range page {
			if page[i].Position.Compare(v.opts.From) > 0 {
				return nil
			}
			if err := fold(&page[i]); err != nil {
				return err
			}
			v.report.PrimedEvents++
		}
		if len(page) < v.opts.PageSize {
			return nil
		}
		last := page[len(page)-1].Version
		if last < next {
			return fmt.Errorf("verify: read the history of %s before the range: version %d returned when reading from %d", stream, last, next)
		}
		next = last + 1
	}
}

// apply checks one operation event and folds it into st.
func (v *verifier) apply(rec *eventstore.RecordedEvent, d decodedEvent, op domain.OperationID, st *operationState) {
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
	if d.err != nil {
		v.emit(S2Decodable, nil, "cannot decode: %v", d.err)
		return
	}
	v.meta = d.meta
	e := d.event
	if r, ok := e.(domain.OperationRequested); ok {
		v.requested(r)
		return
	}
	v.applyEvent(rec, e)
}

// applyEvent checks one event of an operation (of its stream or its
// evidence stream) after its OperationRequested and folds it into v.st.
func (v *verifier) applyEvent(rec *eventstore.RecordedEvent, e domain.Event) {
	st := v.st
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
		v.countRefusal(ev, 1)
	case domain.PresentationRejected:
		v.presentationRejected(ev)
		v.countRefusal(ev, 1)
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
		v.countRefusal(ev, 1)
		switch ev.SecretCheck {
		case "", domain.SecretHeld, domain.SecretMissing, domain.SecretWrong, domain.SecretUnbound:
		default:
			v.emit(S2Decodable, nil, "refused write on %s states secret check %q", ev.ExecutionID, clipText(string(ev.SecretCheck)))
		}
	case domain.RefusalsSummarized:
		v.summarized(ev, st.evidenceLog(v, domain.EvidenceStreamOf(v.op)))
	case domain.LostEffectEscalated:
		v.lostEffect(ev)
	case domain.LogRegressed, domain.LogRegressionAcknowledged:
		v.emit(S2Decodable, nil, "%s belongs in %s, never in an operation's stream", rec.Type, domain.RegressionStream)
	default:
		v.unhandled++
		v.emit(S2Decodable, nil, "event type %s is not one this audit knows", rec.Type)
	}
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
	if from != 0 && st.blocks(from) {
		st.blockingExec--
	}
	if st.blocks(to) {
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

// finish lists the oldest open Unknowns (at most MaxListedUnknowns, kept
// in a bounded max-heap on their order) and marks the report complete.
func (v *verifier) finish() Report {
	oldest := &unknownHeap{}
	for stream, st := range v.ops {
		if st.openExecs == 0 {
			continue
		}
		for i := range st.execs.entries {
			x := &st.execs.entries[i].val
			if !x.state.unknownish() || x.unknown == nil {
				continue
			}
			v.report.OpenUnknownCount++
			if v.opts.MaxListedUnknowns == 0 {
				continue
			}
			if oldest.Len() == v.opts.MaxListedUnknowns {
				if x.unknown.seq > (*oldest)[0].seq {
					continue
				}
				heap.Pop(oldest)
			}
			op, _ := domain.OperationIDFromStream(stream)
			heap.Push(oldest, listedUnknown{seq: x.unknown.seq, u: OpenUnknown{
				Operation: op, Execution: x.id, State: execStateNames[x.state], Since: x.unknown.at,
				Via: x.unknown.via, Position: x.unknown.position, Version: x.unknown.version,
			}})
		}
	}
	v.report.OpenUnknowns = make([]OpenUnknown, oldest.Len())
	for i := len(v.report.OpenUnknowns) - 1; i >= 0; i-- {
		v.report.OpenUnknowns[i] = heap.Pop(oldest).(listedUnknown).u
	}
	v.report.Complete = true
	return v.partial()
}

// listedUnknown is an open Unknown with its order in the run.
type listedUnknown struct {
	seq int64
	u   OpenUnknown
}

// unknownHeap is a max-heap on seq: its top is the newest listed, the one to
// drop when an older one comes.
type unknownHeap []listedUnknown

func (h unknownHeap) Len() int           { return len(h) }
func (h unknownHeap) Less(i, j int) bool { return h[i].seq > h[j].seq }
func (h unknownHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *unknownHeap) Push(x any)        { *h = append(*h, x.(listedUnknown)) }
func (h *unknownHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// partial returns the report as it stands.
func (v *verifier) partial() Report {
	if v.last != nil {
		v.report.Last = v.last.String()
	}
	return v.report
}

// ignoredMember counts an event holding a member this build does not know
// (information: a newer build's additive field, or tampering).
func (v *verifier) ignoredMember(rec *eventstore.RecordedEvent, member string) {
	if v.report.IgnoredMembers == 0 {
		v.report.FirstIgnored = fmt.Sprintf("%s@%d %s", rec.StreamID, rec.Version, clipText(member))
	}
	v.report.IgnoredMembers++
}
