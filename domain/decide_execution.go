package domain

import (
	"time"
)

// Every write an executor makes is conditional on the lease epoch it holds
// (invariant 5) and on the lease secret its claim returned (invariant 10:
// only the holder of a lease writes for its execution). A refused executor
// write is recorded as WriteRefused, whatever refused it (a malformed or
// hostile field, a stale epoch, a missing or wrong secret, a state that does
// not accept it), so what the executor tried to say is kept as evidence; the
// command still fails with the *Refusal. Callers append the returned events
// even when the error is a *Refusal. Only a write naming no execution of an
// existing operation leaves no trace here (there is no stream to tie it to).
//
// The checks run in this order, the first that applies refusing: the fields
// (command.invalid naming the field), the secret (lease.not-held), the epoch
// and state (lease.lost, execution.not-unknown).

// RenewLease extends the lease of an Executing execution held under
// cmd.LeaseEpoch by the holder of cmd.LeaseSecret (and by cmd.WorkerID,
// when given). A write without the holder's secret refuses with
// lease.not-held; an execution whose epoch moved, or that is no longer
// Executing, with lease.lost.
func (o *Operation) RenewLease(cmd RenewLease, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	w := RefuseWrite{ExecutionID: x.ID, Command: CommandRenewLease, LeaseEpoch: cmd.LeaseEpoch, LeaseSecret: cmd.LeaseSecret, WorkerID: cmd.WorkerID}
	lease := cmd.LeaseDuration
	if lease == 0 {
		lease = DefaultLeaseDuration
	}
	r := checkEpoch(cmd.LeaseEpoch)
	if r == nil {
		r = CheckText("worker_id", cmd.WorkerID, MaxIDLength, false)
	}
	if r == nil && (lease < 0 || lease > MaxLeaseDuration) {
		r = refuseField("lease_duration", "lease duration %s outside (0, %s]", lease, MaxLeaseDuration)
	}
	if r == nil {
		r = x.fence(cmd.LeaseEpoch, cmd.LeaseSecret, cmd.WorkerID)
	}
	if r != nil {
		return x.refuseWrite(w, r, now)
	}
	return []Event{LeaseRenewed{ExecutionID: x.ID, LeaseEpoch: x.LeaseEpoch, LeaseExpiresAt: now.Add(lease), RenewedAt: now}}, nil
}

// RecordOutcome records the executor's result under its epoch, by the holder
// of its lease: Completed and NotApplied end the execution, Unknown leaves it
// for reconciliation.
func (o *Operation) RecordOutcome(cmd RecordOutcome, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	w := RefuseWrite{
		ExecutionID: x.ID, Command: CommandRecordOutcome, LeaseEpoch: cmd.LeaseEpoch, LeaseSecret: cmd.LeaseSecret,
		Outcome: cmd.Outcome, ProviderReference: cmd.ProviderReference, Detail: cmd.Detail,
	}
	r := checkEpoch(cmd.LeaseEpoch)
	if r == nil && !cmd.Outcome.Valid() {
		r = refuseField("outcome", "outcome must be Completed, NotApplied or Unknown, got %q", clip(string(cmd.Outcome)))
	}
	if r == nil {
		r = checkEvidenceText(cmd.ProviderReference, cmd.Detail)
	}
	if r == nil {
		r = x.fence(cmd.LeaseEpoch, cmd.LeaseSecret, "")
	}
	if r != nil {
		return x.refuseWrite(w, r, now)
	}
	if cmd.Outcome == Unknown {
		return []Event{OutcomeUnknown{ExecutionID: x.ID, LeaseEpoch: x.LeaseEpoch, Cause: cmd.Detail, RecordedAt: now}}, nil
	}
	return []Event{OutcomeRecorded{
		ExecutionID: x.ID, LeaseEpoch: x.LeaseEpoch, Outcome: cmd.Outcome,
		ProviderReference: cmd.ProviderReference, Detail: cmd.Detail, RecordedAt: now,
	}}, nil
}

// LapseLease moves an Executing execution whose lease expired at now to
// Unknown and raises its epoch, fencing the executor. It is the sweeper's
// command and is never prompted by a duplicate delivery. Refusals here are
// the sweeper's own race with a renewal and are not recorded.
func (o *Operation) LapseLease(cmd LapseLease, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	if x.State != ExecExecuting {
		return nil, refuse(ReasonExecutionNotExecuting, "execution %s is %s", x.ID, x.State)
	}
	if now.Before(x.LeaseExpiresAt) {
		return nil, refuse(ReasonLeaseActive, "lease of %s runs until %s", x.ID, x.LeaseExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	return []Event{LeaseLapsed{
		ExecutionID: x.ID, FromEpoch: x.LeaseEpoch, ToEpoch: x.LeaseEpoch + 1,
		LeaseExpiredAt: x.LeaseExpiresAt, LapsedAt: now,
	}}, nil
}

// RecordLateOutcome lets the executor that held epoch cmd.LeaseEpoch of this
// execution, proven by that lease's secret, record that the request it
// already sent took effect (Completed). It moves only this execution, only
// from Unknown (or Escalated, which is Unknown for safety), and restores no
// ownership. Nobody else's evidence is accepted: a missing or wrong secret
// refuses with lease.not-held, an epoch the secret did not hold with
// lease.lost. A late NotApplied refuses with late-outcome.not-applied (and
// is recorded as evidence): the executor can only vouch for its own
// requests, and once the lease lapsed the reconciler may have resent the
// execution's request under the same key, so NotApplied would let a new
// attempt start beside an effect (found by the simulator, docs/simulation.md).
func (o *Operation) RecordLateOutcome(cmd RecordLateOutcome, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	w := RefuseWrite{
		ExecutionID: x.ID, Command: CommandRecordLateOutcome, LeaseEpoch: cmd.LeaseEpoch, LeaseSecret: cmd.LeaseSecret,
		Outcome: cmd.Outcome, ProviderReference: cmd.ProviderReference, Detail: cmd.Detail,
	}
	r := checkEpoch(cmd.LeaseEpoch)
	if r == nil && !cmd.Outcome.Definite() {
		r = refuseField("outcome", "a late outcome must be Completed or NotApplied, got %q", clip(string(cmd.Outcome)))
	}
	if r == nil {
		r = checkEvidenceText(cmd.ProviderReference, cmd.Detail)
	}
	if r == nil {
		held, check := x.holderOf(cmd.LeaseSecret)
		switch r = x.notHeld(check); {
		case r != nil:
		case cmd.LeaseEpoch != held:
			r = refuse(ReasonLeaseLost, "epoch %d was never held on %s by this lease's holder (it held epoch %d; current %d)", cmd.LeaseEpoch, x.ID, held, x.LeaseEpoch)
		case x.State != ExecUnknown && x.State != ExecEscalated:
			r = refuse(ReasonExecutionNotUnknown, "execution %s is %s", x.ID, x.State)
		case cmd.Outcome == NotApplied:
			r = refuse(ReasonLateNotApplied, "execution %s is %s: a late NotApplied cannot resolve it (the reconciler may have resent its request under the same key); the reconciler asks the provider", x.ID, x.State)
		}
	}
	if r != nil {
		return x.refuseWrite(w, r, now)
	}
	return []Event{LateOutcomeRecorded{
		ExecutionID: x.ID, StaleEpoch: cmd.LeaseEpoch, Outcome: cmd.Outcome,
		ProviderReference: cmd.ProviderReference, Detail: cmd.Detail, RecordedAt: now,
	}}, nil
}

// RefuseWrite records an executor's write an edge refused before it became a
// command (see the RefuseWrite command): the WriteRefused evidence, and
// cmd.Refusal as the error. A write naming no execution of this operation
// refuses as the other executor commands do, and records nothing.
func (o *Operation) RefuseWrite(cmd RefuseWrite, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	switch cmd.Command {
	case CommandRenewLease, CommandRecordOutcome, CommandRecordLateOutcome:
	default:
		return nil, refuseField("command", "command %q is not an executor write", clip(cmd.Command))
	}
	if cmd.Refusal == nil {
		return nil, refuseField("refusal", "a refused write needs its refusal")
	}
	return x.refuseWrite(cmd, cmd.Refusal, now)
}

// Reconcile resolves an Unknown or Escalated execution to a definite
// outcome established by the provider or by a person.
func (o *Operation) Reconcile(cmd Reconcile, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	if !cmd.Outcome.Definite() {
		return nil, refuse(ReasonCommandInvalid, "reconciliation must establish Completed or NotApplied, got %q", cmd.Outcome)
	}
	switch cmd.Method {
	case MethodProviderLookup, MethodProviderResend, MethodOperator:
	default:
		return nil, refuse(ReasonCommandInvalid, "unknown reconciliation method %q", cmd.Method)
	}
	if r := checkEvidenceText(cmd.ProviderReference, cmd.Evidence); r != nil {
		return nil, r
	}
	if cmd.Method == MethodOperator && cmd.Actor == "" {
		return nil, refuse(ReasonCommandInvalid, "an operator resolution must name the operator")
	}
	if x.State != ExecUnknown && x.State != ExecEscalated {
		return nil, refuse(ReasonExecutionNotUnknown, "execution %s is %s", x.ID, x.State)
	}
	return []Event{Reconciled{
		ExecutionID: x.ID, Outcome: cmd.Outcome, Method: cmd.Method, ProviderReference: cmd.ProviderReference,
		Actor: cmd.Actor, Evidence: cmd.Evidence, ReconciledAt: now,
	}}, nil
}

// Escalate hands an Unknown execution to a person's work queue.
func (o *Operation) Escalate(cmd Escalate, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	if r := checkText("reason", cmd.Reason, MaxTextLength, true); r != nil {
		return nil, r
	}
	if r := checkText("detail", cmd.Detail, MaxTextLength, false); r != nil {
		return nil, r
	}
	switch x.State {
	case ExecUnknown:
	case ExecEscalated:
		return nil, refuse(ReasonExecutionAlreadyEscalated, "execution %s is already escalated", x.ID)
	default:
		return nil, refuse(ReasonExecutionNotUnknown, "execution %s is %s", x.ID, x.State)
	}
	return []Event{Escalated{ExecutionID: x.ID, Reason: cmd.Reason, Detail: cmd.Detail, EscalatedAt: now}}, nil
}

func (o *Operation) executionFor(id ExecutionID) (*Execution, error) {
	if !o.Exists() {
		return nil, refuse(ReasonOperationUnknown, "no such operation")
	}
	x := o.Execution(id)
	if x == nil {
		return nil, refuse(ReasonExecutionUnknown, "no execution %s on operation %s", id, o.ID)
	}
	return x, nil
}

// fence refuses a renewal or outcome that is not made by the holder of the
// lease (secret), under the execution's current epoch while it is Executing
// (and, when worker is given, by its owner).
func (x *Execution) fence(epoch int64, secret, worker string) *Refusal {
	held, check := x.holderOf(secret)
	if r := x.notHeld(check); r != nil {
		return r
	}
	if planted(BugStaleEpochAccepted) {
		return nil
	}
	switch {
	case epoch != x.LeaseEpoch:
		return refuse(ReasonLeaseLost, "epoch %d is stale: %s is at epoch %d", epoch, x.ID, x.LeaseEpoch)
	case held != epoch:
		return refuse(ReasonLeaseLost, "this lease secret held epoch %d of %s, not epoch %d", held, x.ID, epoch)
	case x.State != ExecExecuting:
		return refuse(ReasonLeaseLost, "execution %s is %s", x.ID, x.State)
	case worker != "" && worker != x.LeaseOwner:
		return refuse(ReasonLeaseLost, "lease of %s is held by %s", x.ID, x.LeaseOwner)
	}
	return nil
}

// refuseWrite returns the evidence of the refused write w and r. Every text
// field is kept through EvidenceText, so that hostile text (the very reason
// for some refusals) is stored escaped and cut rather than lost, and the
// fields that had to be altered are named. The secret is never kept: only
// how it compared.
func (x *Execution) refuseWrite(w RefuseWrite, r *Refusal, now time.Time) ([]Event, error) {
	_, check := x.holderOf(w.LeaseSecret)
	ev := WriteRefused{
		ExecutionID: x.ID, Command: w.Command, Reason: r.Reason, LeaseEpoch: w.LeaseEpoch, CurrentEpoch: x.LeaseEpoch,
		SecretCheck: check, RefusedAt: now,
	}
	keep := func(field, s string, max int) string {
		safe, altered := EvidenceText(s, max)
		if altered {
			ev.Escaped = append(ev.Escaped, field)
		}
		return safe
	}
	ev.Outcome = Outcome(keep("outcome", string(w.Outcome), maxOutcomeLength))
	ev.ProviderReference = keep("provider_reference", w.ProviderReference, MaxProviderReferenceLength)
	ev.Detail = keep("detail", w.Detail, MaxTextLength)
	ev.WorkerID = keep("worker_id", w.WorkerID, MaxIDLength)
	ev.Field = keep("field", r.Field, MaxIDLength)
	ev.RefusalDetail = keep("refusal_detail", r.Detail, MaxTextLength)
	return []Event{ev}, r
}

const (
	// maxOutcomeLength bounds an outcome kept as evidence: the longest valid
	// one is "NotApplied"; more is kept only to show what was sent.
	maxOutcomeLength = 64
)

// checkEpoch refuses an epoch no lease ever had (epochs start at 1).
func checkEpoch(epoch int64) *Refusal {
	if epoch < 1 {
		return refuseField("lease_epoch", "lease_epoch %d: epochs start at 1; send the epoch the claim returned", epoch)
	}
	return nil
}

// clip makes text safe and short enough to quote in a refusal.
func clip(s string) string {
	safe, _ := EvidenceText(s, maxOutcomeLength)
	return safe
}

func checkEvidenceText(ref, detail string) *Refusal {
	if r := checkText("provider_reference", ref, MaxProviderReferenceLength, false); r != nil {
		return r
	}
	return checkText("detail", detail, MaxTextLength, false)
}
