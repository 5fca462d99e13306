package domain

import "fmt"

// ClaimStatus is the answer to a presentation of authority.
type ClaimStatus string

const (
	// Claimed: the capability was consumed and an execution opened.
	StatusClaimed ClaimStatus = "Claimed"
	// DuplicateDelivery: this message id was already seen on this operation.
	StatusDuplicateDelivery ClaimStatus = "DuplicateDelivery"
	// AlreadyConsumed: the authority is spent, whichever message presents it.
	StatusAlreadyConsumed ClaimStatus = "AlreadyConsumed"
	StatusExpired         ClaimStatus = "Expired"
	StatusRevoked         ClaimStatus = "Revoked"
	StatusInvalid         ClaimStatus = "Invalid"
	// OperationNotExecutable: an execution of the operation is Executing,
	// Unknown, Escalated or (for a single-use kind) Completed; the
	// capability, or the use, was not spent.
	StatusOperationNotExecutable ClaimStatus = "OperationNotExecutable"
)

// Reason is a stable, machine-readable reason code. Never rename one: stored
// evidence, dashboards and analysts' queries refer to them.
type Reason string

const (
	ReasonDeliveryDuplicate          Reason = "delivery.duplicate"
	ReasonCapabilityAlreadyConsumed  Reason = "capability.already-consumed"
	ReasonCapabilityExpired          Reason = "capability.expired"
	ReasonCapabilityRevoked          Reason = "capability.revoked"
	ReasonCapabilityInvalid          Reason = "capability.invalid"
	ReasonCapabilityWrongOperation   Reason = "capability.wrong-operation"
	ReasonCapabilityWrongAttempt     Reason = "capability.wrong-attempt"
	ReasonCapabilitySuperseded       Reason = "capability.superseded"
	ReasonOperationExecuting         Reason = "operation.executing"
	ReasonOperationOutcomeUnknown    Reason = "operation.outcome-unknown"
	ReasonOperationCompleted         Reason = "operation.completed"
	ReasonOperationUnknown           Reason = "operation.unknown"
	ReasonOperationExists            Reason = "operation.exists"
	ReasonOperationNotDecidable      Reason = "operation.not-decidable"
	ReasonDecisionNotAllowed         Reason = "decision.not-allowed"
	ReasonLeaseLost                  Reason = "lease.lost"
	ReasonLeaseActive                Reason = "lease.active"
	ReasonExecutionUnknown           Reason = "execution.unknown"
	ReasonExecutionNotUnknown        Reason = "execution.not-unknown"
	ReasonExecutionNotExecuting      Reason = "execution.not-executing"
	ReasonExecutionAlreadyEscalated  Reason = "execution.already-escalated"
	ReasonCommandInvalid             Reason = "command.invalid"
	ReasonPolicyOrderNotRefundable   Reason = "policy.order-not-refundable"
	ReasonPolicyOverApprovalLimit    Reason = "policy.over-approval-limit"
	ReasonPolicyChargebackOpen       Reason = "policy.chargeback-open"
	ReasonPolicyExceedsOrderTotal    Reason = "policy.exceeds-order-total"
	ReasonPolicyOrderTotalMissing    Reason = "policy.order-total-missing"
	ReasonPolicyExportNotReady       Reason = "policy.export-not-ready"
	ReasonCapabilityAlreadyRevoked   Reason = "capability.already-revoked"
	ReasonCapabilityRevokeAfterUse   Reason = "capability.consumed-cannot-revoke"
	ReasonOperationAttemptInProgress Reason = "operation.attempt-open"
	// ReasonDeliveryMalformed: a transport message that cannot be decoded,
	// lacks an identifier or carries a malformed one (dead-lettered).
	ReasonDeliveryMalformed Reason = "delivery.malformed"
	// ReasonDeliveryAttemptsExhausted: a message handed out too often without
	// being settled (dead-lettered by the Postgres queue).
	ReasonDeliveryAttemptsExhausted Reason = "delivery.attempts-exhausted"
)

// ReasonLeaseNotHeld: an executor write without the lease secret its claim
// returned (missing or wrong), or for an execution claimed before leases were
// bound to their holder (it has no digest to compare with). Knowing an
// execution id and its epoch is not authority. The API answers 409.
const ReasonLeaseNotHeld Reason = "lease.not-held"

// ReasonLateNotApplied: a stale executor's NotApplied, handed in as late
// evidence, cannot resolve an Unknown execution: the executor knows only
// its own requests, and the reconciler may have resent the execution's
// request under the same key since the lease lapsed. The reconciler asks the
// provider instead. The API answers 409.
const ReasonLateNotApplied Reason = "late-outcome.not-applied"

// Refusal is a command the model declined, with a stable reason. Whether the
// refusal is also recorded as an event depends on the command (a refused
// presentation always is).
type Refusal struct {
	Reason Reason
	Detail string
	// Field names the command field at fault, when the refusal is about one
	// field's value (command.invalid); edges report it (the API's "field").
	Field string
}

func (r *Refusal) Error() string {
	if r.Detail == "" {
		return string(r.Reason)
	}
	return fmt.Sprintf("%s: %s", r.Reason, r.Detail)
}

func refuse(reason Reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}
