package domain

import (
	"fmt"
	"time"
)

// ClaimResult is the answer to a presentation. Events are what the ledger
// must record for it: a Claimed event, or the evidence of the refusal.
type ClaimResult struct {
	Status             ClaimStatus
	Reason             Reason // empty when Claimed
	ExecutionAttempted bool   // never true here: execution happens after a claim, elsewhere
	ReplaySuspected    bool
	// Execution is the execution opened by the claim (Claimed), or the
	// operation's current execution as the presentation found it.
	ExecutionID    ExecutionID
	ExecutionState ExecutionState
	Claimed        *Claimed // set when Status is StatusClaimed
	// Use is the use the claim consumed (Claimed), and UsesLeft how many
	// uses its capability has left after it.
	Use      int
	UsesLeft int
	Events   []Event
}

// Claim decides a presentation of authority, checking in this order, and
// stopping at the first that applies (each refusal is evidence to record and
// changes nothing else):
//
//  1. the message id was already seen on this operation: DuplicateDelivery
//     (reports the current execution's state; never changes it);
//  2. the capability is consumed (every one of its uses claimed):
//     AlreadyConsumed, even if it has expired since, and replay suspected
//     (the message is new to this operation): for a capability of N uses,
//     the (N+1)-th presentation;
//  3. unknown, bound to another operation or attempt, revoked, expired or
//     superseded by a later decision: Invalid, Revoked or Expired;
//  4. an execution of this operation blocks a new one under the kind's
//     effect policy: OperationNotExecutable, and neither the capability nor
//     a use of it is spent. For a single-use kind that is an execution
//     Executing, Unknown, Escalated or Completed, and a capability of an
//     attempt that already ended NotApplied is Invalid; for a kind of
//     bounded use an execution Executing, Unknown or Escalated (at most one
//     open at a time; Unknown blocks the next use until reconciled);
//  5. otherwise one use of the capability is consumed (its next, from 1; the
//     last one consumes the capability) and an execution opened under a
//     lease (epoch 1, owner, expiry, the digest of its holder's secret),
//     with the use's own provider key, derived from the operation, the
//     attempt and the use: Claimed.
//
// The command must be well formed (a *Refusal with command.invalid
// otherwise, and nothing to record). o must exist: presentations to an
// operation that does not exist are UnattributedPresentation's job.
func (o *Operation) Claim(cmd Claim, now time.Time) (ClaimResult, error) {
	if err := validateClaim(cmd); err != nil {
		return ClaimResult{}, err
	}
	if !o.Exists() {
		return ClaimResult{}, refuse(ReasonOperationUnknown, "no such operation")
	}
	cur := o.CurrentExecution()
	// 1. transport duplicate
	if _, seen := o.Messages[cmd.MessageID]; seen {
		return o.duplicate(cmd, now), nil
	}
	reject := func(status ClaimStatus, reason Reason, replay bool, blocker *Execution, detail string) ClaimResult {
		ev := PresentationRejected{
			Status: status, Reason: reason, MessageID: cmd.MessageID, CapabilityID: cmd.CapabilityID,
			OperationID: o.ID, WorkerID: cmd.WorkerID, ReplaySuspected: replay, Detail: detail, RejectedAt: now,
		}
		r := ClaimResult{Status: status, Reason: reason, ReplaySuspected: replay}
		if blocker != nil {
			ev.ExecutionID = blocker.ID
		}
		if cur != nil {
			r.ExecutionID, r.ExecutionState = cur.ID, cur.State
		}
		r.Events = []Event{ev}
		return r
	}
	c := o.Capabilities[cmd.CapabilityID]
	// 2. spent authority
	if c != nil && c.State == CapConsumed && !planted(BugResetConsumedCapability) {
		detail := "consumed by message " + string(c.ConsumedBy)
		if o.Policy.Repeats {
			detail = fmt.Sprintf("all %d uses consumed, the last by message %s", c.Uses, c.ConsumedBy)
		}
		return reject(StatusAlreadyConsumed, ReasonCapabilityAlreadyConsumed, true, o.Execution(c.Execution), detail), nil
	}
	// 3. static validity
	switch {
	case cmd.BoundOperation != "" && cmd.BoundOperation != o.ID:
		return reject(StatusInvalid, ReasonCapabilityWrongOperation, false, nil, "capability is bound to operation "+string(cmd.BoundOperation)), nil
	case c == nil:
		return reject(StatusInvalid, ReasonCapabilityInvalid, false, nil, "no such capability on this operation"), nil
	case cmd.BoundAttempt != 0 && cmd.BoundAttempt != c.Attempt:
		return reject(StatusInvalid, ReasonCapabilityWrongAttempt, false, nil, "token names another attempt than the capability"), nil
	case c.State == CapRevoked:
		return reject(StatusRevoked, ReasonCapabilityRevoked, false, nil, ""), nil
	case !now.Before(c.ExpiresAt):
		return reject(StatusExpired, ReasonCapabilityExpired, false, nil, "expired at "+c.ExpiresAt.UTC().Format(time.RFC3339)), nil
	}
	if d, _ := o.LatestDecision(); d.ID != c.DecisionID {
		return reject(StatusInvalid, ReasonCapabilitySuperseded, false, nil, "decision "+string(c.DecisionID)+" was superseded by "+string(d.ID)), nil
	}
	// 4. the operation barrier: at most one consequential execution (a
	// single-use kind), at most one open execution (bounded use)
	if b := o.blockingExecution(); b != nil && !planted(BugSkipOperationBarrier) {
		return reject(StatusOperationNotExecutable, blockingReason(b.State), false, b, "execution "+string(b.ID)+" is "+string(b.State)), nil
	}
	if !o.Policy.Repeats && cur != nil && cur.Attempt >= c.Attempt && !planted(BugSkipOperationBarrier) {
		return reject(StatusInvalid, ReasonCapabilityWrongAttempt, false, nil, "attempt already ended NotApplied; a new attempt needs a new decision"), nil
	}
	// 5. consume and open the execution
	if _, err := ParseExecutionID(string(cmd.ExecutionID)); err != nil {
		return ClaimResult{}, refuse(ReasonCommandInvalid, "%v", err)
	}
	d, _ := o.LatestDecision()
	lease := cmd.LeaseDuration
	if lease == 0 {
		lease = DefaultLeaseDuration
	}
	use := c.Claims + 1
	claimed := Claimed{
		ExecutionID: cmd.ExecutionID, CapabilityID: c.ID, Kind: o.Kind, MessageID: cmd.MessageID, WorkerID: cmd.WorkerID,
		Attempt: c.Attempt, Use: use, LeaseEpoch: 1, LeaseExpiresAt: now.Add(lease),
		IdempotencyKey: o.Policy.UseKey(d.IdempotencyKey, use), ClaimedAt: now, LeaseSecretDigest: cmd.LeaseSecretDigest,
	}
	return ClaimResult{
		Status: StatusClaimed, ExecutionID: cmd.ExecutionID, ExecutionState: ExecExecuting,
		Claimed: &claimed, Use: use, UsesLeft: c.Uses - use, Events: []Event{claimed},
	}, nil
}

func validateClaim(cmd Claim) error {
	if _, err := ParseMessageID(string(cmd.MessageID)); err != nil {
		return refuse(ReasonCommandInvalid, "%v", err)
	}
	if cmd.CorrelationID != "" {
		if _, err := ParseCorrelationID(string(cmd.CorrelationID)); err != nil {
			return refuse(ReasonCommandInvalid, "%v", err)
		}
	}
	if _, err := ParseCapabilityID(string(cmd.CapabilityID)); err != nil {
		return refuse(ReasonCommandInvalid, "%v", err)
	}
	if err := checkChars("worker id", cmd.WorkerID, true); err != nil {
		return refuse(ReasonCommandInvalid, "%v", err)
	}
	if cmd.LeaseDuration < 0 || cmd.LeaseDuration > MaxLeaseDuration {
		return refuse(ReasonCommandInvalid, "lease duration %s outside (0, %s]", cmd.LeaseDuration, MaxLeaseDuration)
	}
	if r := checkLeaseSecretDigest(cmd.LeaseSecretDigest); r != nil {
		return r
	}
	return nil
}

// ClaimSeen is Claim of a message the operation's evidence stream records
// as presented before (refused, or a duplicate): a transport duplicate,
// like a message an operation's own stream names (refused presentations
// are kept beside the operation's stream, see EvidenceStreamOf). The
// command must be well formed and o must exist, as for Claim.
func (o *Operation) ClaimSeen(cmd Claim, now time.Time) (ClaimResult, error) {
	if err := validateClaim(cmd); err != nil {
		return ClaimResult{}, err
	}
	if !o.Exists() {
		return ClaimResult{}, refuse(ReasonOperationUnknown, "no such operation")
	}
	return o.duplicate(cmd, now), nil
}

// duplicate is the answer to a message presented before.
func (o *Operation) duplicate(cmd Claim, now time.Time) ClaimResult {
	cur := o.CurrentExecution()
	r := ClaimResult{Status: StatusDuplicateDelivery, Reason: ReasonDeliveryDuplicate}
	ev := DeliveryDuplicated{MessageID: cmd.MessageID, CapabilityID: cmd.CapabilityID, WorkerID: cmd.WorkerID, SeenAt: now}
	if cur != nil {
		r.ExecutionID, r.ExecutionState = cur.ID, cur.State
		ev.ExecutionID, ev.ExecutionState = cur.ID, cur.State
	}
	r.Events = []Event{ev}
	return r
}

// UnattributedPresentation is the evidence of a presentation that cannot be
// tied to an existing operation: it belongs in EvidenceStream.
func UnattributedPresentation(op OperationID, msg MessageID, capability CapabilityID, worker string, reason Reason, detail string, now time.Time) PresentationRejected {
	return PresentationRejected{
		Status: StatusInvalid, Reason: reason, MessageID: msg, CapabilityID: capability, OperationID: op,
		WorkerID: worker, Detail: detail, RejectedAt: now,
	}
}
