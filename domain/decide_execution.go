package domain

import "time"

// Every write an executor makes is conditional on the lease epoch it holds
// (invariant 5). A refused executor write is recorded as WriteRefused, so
// what the executor tried to say is kept as evidence; the command still
// fails with a *Refusal. Callers append the returned events even when the
// error is a *Refusal.

// RenewLease extends the lease of an Executing execution held under
// cmd.LeaseEpoch (and by cmd.WorkerID, when given). An execution whose epoch
// moved, or that is no longer Executing, refuses with lease.lost.
func (o *Operation) RenewLease(cmd RenewLease, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	lease := cmd.LeaseDuration
	if lease == 0 {
		lease = DefaultLeaseDuration
	}
	if lease < 0 || lease > MaxLeaseDuration {
		return nil, refuse(ReasonCommandInvalid, "lease duration %s outside (0, %s]", lease, MaxLeaseDuration)
	}
	if r := checkText("worker_id", cmd.WorkerID, MaxIDLength, false); r != nil {
		return nil, r
	}
	if r := x.fence(cmd.LeaseEpoch, cmd.WorkerID); r != nil {
		return []Event{x.refused("RenewLease", r.Reason, cmd.LeaseEpoch, "", "", r.Detail, now)}, r
	}
	return []Event{LeaseRenewed{ExecutionID: x.ID, LeaseEpoch: x.LeaseEpoch, LeaseExpiresAt: now.Add(lease), RenewedAt: now}}, nil
}

// RecordOutcome records the executor's result under its epoch: Completed and
// NotApplied end the execution, Unknown leaves it for reconciliation.
func (o *Operation) RecordOutcome(cmd RecordOutcome, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	if !cmd.Outcome.Valid() {
		return nil, refuse(ReasonCommandInvalid, "outcome must be Completed, NotApplied or Unknown, got %q", cmd.Outcome)
	}
	if r := checkEvidenceText(cmd.ProviderReference, cmd.Detail); r != nil {
		return nil, r
	}
	if r := x.fence(cmd.LeaseEpoch, ""); r != nil {
		return []Event{x.refused("RecordOutcome", r.Reason, cmd.LeaseEpoch, cmd.Outcome, cmd.ProviderReference, cmd.Detail, now)}, r
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

// RecordLateOutcome lets an executor that held epoch cmd.LeaseEpoch of this
// execution record the definite result of the request it already sent. It
// moves only this execution, only from Unknown (or Escalated, which is Unknown
// for safety), and restores no ownership.
func (o *Operation) RecordLateOutcome(cmd RecordLateOutcome, now time.Time) ([]Event, error) {
	x, err := o.executionFor(cmd.ExecutionID)
	if err != nil {
		return nil, err
	}
	if !cmd.Outcome.Definite() {
		return nil, refuse(ReasonCommandInvalid, "a late outcome must be Completed or NotApplied, got %q", cmd.Outcome)
	}
	if r := checkEvidenceText(cmd.ProviderReference, cmd.Detail); r != nil {
		return nil, r
	}
	if cmd.LeaseEpoch < 1 || cmd.LeaseEpoch > x.LeaseEpoch {
		r := refuse(ReasonLeaseLost, "epoch %d was never held on %s (current %d)", cmd.LeaseEpoch, x.ID, x.LeaseEpoch)
		return []Event{x.refused("RecordLateOutcome", r.Reason, cmd.LeaseEpoch, cmd.Outcome, cmd.ProviderReference, cmd.Detail, now)}, r
	}
	if x.State != ExecUnknown && x.State != ExecEscalated {
		r := refuse(ReasonExecutionNotUnknown, "execution %s is %s", x.ID, x.State)
		return []Event{x.refused("RecordLateOutcome", r.Reason, cmd.LeaseEpoch, cmd.Outcome, cmd.ProviderReference, cmd.Detail, now)}, r
	}
	return []Event{LateOutcomeRecorded{
		ExecutionID: x.ID, StaleEpoch: cmd.LeaseEpoch, Outcome: cmd.Outcome,
		ProviderReference: cmd.ProviderReference, Detail: cmd.Detail, RecordedAt: now,
	}}, nil
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

// fence refuses a write that is not made under the execution's current epoch
// while it is Executing (and, when worker is given, by its owner).
func (x *Execution) fence(epoch int64, worker string) *Refusal {
	switch {
	case epoch != x.LeaseEpoch:
		return refuse(ReasonLeaseLost, "epoch %d is stale: %s is at epoch %d", epoch, x.ID, x.LeaseEpoch)
	case x.State != ExecExecuting:
		return refuse(ReasonLeaseLost, "execution %s is %s", x.ID, x.State)
	case worker != "" && worker != x.LeaseOwner:
		return refuse(ReasonLeaseLost, "lease of %s is held by %s", x.ID, x.LeaseOwner)
	}
	return nil
}

func (x *Execution) refused(command string, reason Reason, epoch int64, outcome Outcome, ref, detail string, now time.Time) WriteRefused {
	return WriteRefused{
		ExecutionID: x.ID, Command: command, Reason: reason, LeaseEpoch: epoch, CurrentEpoch: x.LeaseEpoch,
		Outcome: outcome, ProviderReference: ref, Detail: detail, RefusedAt: now,
	}
}

func checkEvidenceText(ref, detail string) *Refusal {
	if r := checkText("provider_reference", ref, MaxIDLength*2, false); r != nil {
		return r
	}
	return checkText("detail", detail, MaxTextLength, false)
}
