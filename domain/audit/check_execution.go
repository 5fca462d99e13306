package audit

import (
	"time"

	"opledger/domain"
)

// The checks on executions: leases, outcomes, Unknown and its resolution
// (invariants 4, 5 and 8).

// execution returns the execution id names on the current operation, or
// reports S4 and returns nil.
func (v *verifier) execution(id domain.ExecutionID) *execRec {
	x := v.st.execs.get(v.hash.of(string(id)))
	if x == nil {
		v.emit(S4ReferencesResolve, nil, "names execution %s, never claimed on this operation", id)
	}
	return x
}

// fenced reports I5 unless x is Executing under epoch: what every executor
// write (renewal, outcome, Unknown) needs.
func (v *verifier) fenced(x *execRec, id domain.ExecutionID, epoch int64) {
	switch {
	case x.state != exExecuting:
		v.emit(I5EpochFencing, []int64{x.version}, "executor write on %s, which is %s: only an Executing execution accepts one", id, x.state)
	case epoch != x.epoch:
		v.emit(I5EpochFencing, nil, "executor write on %s under epoch %d; its current epoch is %d", id, epoch, x.epoch)
	}
}

// duplicateCaused reports I4 when the event is attributed to a message this
// operation recorded as a duplicate delivery (its metadata causation) and
// was written by someone other than x's lease owner: a duplicate must never
// change an execution. The owner's own writes are conditional on its epoch
// and legitimate whatever their causation.
func (v *verifier) duplicateCaused(x *execRec, id domain.ExecutionID) {
	if v.st.duplicated.len() == 0 || v.meta.CausationID == "" {
		return
	}
	if v.st.duplicated.get(v.hash.of(v.meta.CausationID)) != nil && v.hash.of(v.meta.Actor) != x.owner {
		v.emit(I4UnknownNeverInferred, nil, "%s changes %s on behalf of duplicate delivery %s (by %q, not the lease owner)",
			v.rec.Type, id, v.meta.CausationID, v.meta.Actor)
	}
}

// escalationUndone reports I8 when an event other than Reconciled or late
// evidence moves x out of Escalated.
func (v *verifier) escalationUndone(x *execRec, id domain.ExecutionID) {
	if x.state == exEscalated {
		v.emit(I8UnknownResolved, []int64{x.version}, "%s moves escalated %s without reconciliation", v.rec.Type, id)
	}
}

// definite maps an outcome an event states to a state, reporting I4 for
// Unknown (Unknown comes only from OutcomeUnknown or LeaseLapsed) and S2 for
// anything else that is not Completed or NotApplied.
func (v *verifier) definite(o domain.Outcome, id domain.ExecutionID) (execState, bool) {
	if s, ok := stateOfOutcome(o); ok {
		return s, true
	}
	if o == domain.Unknown {
		v.emit(I4UnknownNeverInferred, nil, "%s makes %s Unknown: Unknown comes only from the executor's OutcomeUnknown or a LeaseLapsed", v.rec.Type, id)
		return exUnknown, true
	}
	v.emit(S2Decodable, nil, "%s states outcome %q for %s", v.rec.Type, o, id)
	return 0, false
}

func (v *verifier) leaseRenewed(ev domain.LeaseRenewed) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	v.holderWrite(x, ev.ExecutionID)
	v.fenced(x, ev.ExecutionID, ev.LeaseEpoch)
	if x.state == exExecuting && ev.LeaseEpoch == x.epoch {
		x.leaseExpires = ev.LeaseExpiresAt.UnixNano()
	}
}

func (v *verifier) outcomeRecorded(ev domain.OutcomeRecorded) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	v.holderWrite(x, ev.ExecutionID)
	v.fenced(x, ev.ExecutionID, ev.LeaseEpoch)
	if x.state == exUnknown {
		v.emit(I8UnknownResolved, []int64{x.version}, "Unknown %s closed by an executor's OutcomeRecorded, not by reconciliation", ev.ExecutionID)
	}
	v.escalationUndone(x, ev.ExecutionID)
	v.duplicateCaused(x, ev.ExecutionID)
	if s, ok := v.definite(ev.Outcome, ev.ExecutionID); ok {
		v.moveTo(x, ev.ExecutionID, s, ev.RecordedAt)
	}
}

func (v *verifier) outcomeUnknown(ev domain.OutcomeUnknown) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	v.holderWrite(x, ev.ExecutionID)
	v.fenced(x, ev.ExecutionID, ev.LeaseEpoch)
	v.escalationUndone(x, ev.ExecutionID)
	v.duplicateCaused(x, ev.ExecutionID)
	v.moveTo(x, ev.ExecutionID, exUnknown, ev.RecordedAt)
}

func (v *verifier) leaseLapsed(ev domain.LeaseLapsed) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	switch {
	case x.state != exExecuting:
		v.emit(I4UnknownNeverInferred, []int64{x.version}, "lease of %s lapses while it is %s: only an Executing execution's lease lapses", ev.ExecutionID, x.state)
	case ev.LapsedAt.Before(time.Unix(0, x.leaseExpires)):
		v.emit(I4UnknownNeverInferred, nil, "%s marked Unknown at %s while its lease ran until %s: inferred, not observed",
			ev.ExecutionID, stamp(ev.LapsedAt), stamp(time.Unix(0, x.leaseExpires)))
	}
	if ev.FromEpoch != x.epoch {
		v.emit(I5EpochFencing, nil, "lapse of %s fences epoch %d; its current epoch is %d", ev.ExecutionID, ev.FromEpoch, x.epoch)
	}
	if ev.ToEpoch <= x.epoch {
		v.emit(I5EpochFencing, nil, "lapse of %s sets epoch %d, not above epoch %d: the stale executor is not fenced", ev.ExecutionID, ev.ToEpoch, x.epoch)
	}
	v.escalationUndone(x, ev.ExecutionID)
	v.duplicateCaused(x, ev.ExecutionID)
	x.epoch = max(x.epoch, ev.ToEpoch)
	v.moveTo(x, ev.ExecutionID, exUnknown, ev.LapsedAt)
}

func (v *verifier) lateOutcomeRecorded(ev domain.LateOutcomeRecorded) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	v.holderWrite(x, ev.ExecutionID)
	if !x.state.unknownish() {
		v.emit(I5EpochFencing, []int64{x.version}, "late outcome for %s, which is %s: late evidence only resolves an Unknown", ev.ExecutionID, x.state)
	}
	if ev.StaleEpoch < 1 || ev.StaleEpoch > x.epoch {
		v.emit(I5EpochFencing, nil, "late outcome for %s under epoch %d, which it never held (current %d)", ev.ExecutionID, ev.StaleEpoch, x.epoch)
	}
	v.duplicateCaused(x, ev.ExecutionID)
	if s, ok := v.definite(ev.Outcome, ev.ExecutionID); ok {
		v.moveTo(x, ev.ExecutionID, s, ev.RecordedAt)
	}
}

func (v *verifier) reconciled(ev domain.Reconciled) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	if !x.state.unknownish() {
		v.emit(I8UnknownResolved, []int64{x.version}, "reconciles %s, which is %s: only an Unknown or Escalated execution is reconciled", ev.ExecutionID, x.state)
	}
	switch ev.Method {
	case domain.MethodProviderLookup, domain.MethodProviderResend, domain.MethodOperator:
	default:
		v.emit(S2Decodable, nil, "reconciliation of %s by method %q", ev.ExecutionID, ev.Method)
	}
	v.duplicateCaused(x, ev.ExecutionID)
	if s, ok := v.definite(ev.Outcome, ev.ExecutionID); ok {
		v.moveTo(x, ev.ExecutionID, s, ev.ReconciledAt)
	}
}

func (v *verifier) escalated(ev domain.Escalated) {
	x := v.execution(ev.ExecutionID)
	if x == nil {
		return
	}
	if !x.state.unknownish() {
		v.emit(I4UnknownNeverInferred, []int64{x.version}, "escalates %s, which is %s: only an Unknown is escalated", ev.ExecutionID, x.state)
	}
	v.duplicateCaused(x, ev.ExecutionID)
	if x.state != exEscalated {
		at := ev.EscalatedAt
		if x.unknown != nil {
			at = x.unknown.at // Unknown since then; escalated since now
		}
		v.moveTo(x, ev.ExecutionID, exEscalated, at)
	}
}

// moveTo sets x's state, recording when it became Unknown.
func (v *verifier) moveTo(x *execRec, id domain.ExecutionID, to execState, at time.Time) {
	wasUnknownish := x.state.unknownish()
	v.setState(x, to)
	if to.unknownish() && (!wasUnknownish || x.unknown == nil) {
		v.becameUnknown(x, id, at)
	}
}

// lostEffect opens the Escalated execution a LostEffectEscalated records:
// an effect the executor made (or may have) for an execution the store
// lost. It needs no capability (the claim it was made under is what was
// lost), blocks a new execution as an Escalated one does, and only a
// Reconciled ends it.
func (v *verifier) lostEffect(ev domain.LostEffectEscalated) {
	st := v.st
	if ev.ExecutionID == "" {
		v.emit(S2Decodable, nil, "a lost effect in an operation's stream opens no execution")
		return
	}
	if ev.Outcome != domain.Completed && ev.Outcome != domain.Unknown {
		v.emit(S2Decodable, nil, "a lost effect states outcome %q: only Completed or Unknown is escalated", ev.Outcome)
	}
	xk := v.hash.of(string(ev.ExecutionID))
	if x := st.execs.get(xk); x != nil {
		v.emit(S4ReferencesResolve, []int64{x.version}, "execution id %s is used a second time", ev.ExecutionID)
		return
	}
	x := st.execs.put(xk, execRec{attempt: int32(ev.Attempt)})
	x.id = ev.ExecutionID
	st.lastAttempt = max(st.lastAttempt, ev.Attempt)
	v.moveTo(x, ev.ExecutionID, exEscalated, ev.FoundAt)
}
