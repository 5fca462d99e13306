package domain

import "time"

// PolicyVersion names the refund policy this build evaluates. A decision
// records it so an auditor knows which rules produced the verdict.
const PolicyVersion = "refund-policy/v1"

// Request decides RequestOperation. Every text the command carries is
// checked before anything is recorded, and a refusal names the field at
// fault (the API's names: order_id, amount_minor, ...).
func (o *Operation) Request(cmd RequestOperation, now time.Time) ([]Event, error) {
	if o.Exists() {
		return nil, refuse(ReasonOperationExists, "operation %s already exists", o.ID)
	}
	if _, err := ParseOperationID(string(cmd.OperationID)); err != nil {
		return nil, refuseID("operation_id", err)
	}
	if _, err := ParseCorrelationID(string(cmd.CorrelationID)); err != nil {
		return nil, refuseID("correlation_id", err)
	}
	if err := validateOrder(cmd.OrderID, cmd.AmountMinor, cmd.Currency); err != nil {
		return nil, err
	}
	if cmd.OrderTotalMinor < 0 {
		return nil, refuseField("order_total_minor", "order_total_minor must not be negative")
	}
	if r := checkText("request_key", cmd.RequestKey, MaxRequestKeyLength, false); r != nil {
		return nil, r
	}
	if r := checkText("request_hash", cmd.RequestHash, MaxRequestHashLength, false); r != nil {
		return nil, r
	}
	if r := checkText("requested_by", cmd.RequestedBy, MaxIDLength, false); r != nil {
		return nil, r
	}
	return []Event{OperationRequested{
		OperationID: cmd.OperationID, OrderID: cmd.OrderID, AmountMinor: cmd.AmountMinor,
		Currency: cmd.Currency, OrderTotalMinor: cmd.OrderTotalMinor, CorrelationID: cmd.CorrelationID,
		RequestedBy: cmd.RequestedBy, RequestedAt: now, RequestKey: cmd.RequestKey, RequestHash: cmd.RequestHash,
	}}, nil
}

// Bounds of the request key (the API's Idempotency-Key) and of the hash of
// the request recorded with it.
const (
	MaxRequestKeyLength  = 255
	MaxRequestHashLength = 128
)

func validateOrder(orderID string, amount int64, currency string) error {
	if err := checkChars("order id", orderID, true); err != nil {
		return refuseID("order_id", err)
	}
	if amount <= 0 {
		return refuseField("amount_minor", "amount_minor must be positive, got %d", amount)
	}
	if len(currency) != 3 || currency[0] < 'A' || currency[0] > 'Z' || currency[1] < 'A' || currency[1] > 'Z' || currency[2] < 'A' || currency[2] > 'Z' {
		return refuseField("currency", "currency must be an ISO 4217 code in capitals, got %q", currency)
	}
	return nil
}

// Decide evaluates the refund policy (PolicyVersion) for the next attempt.
//
// It is refused while an execution blocks a new one (the outcome must be
// known first) and after completion. Otherwise it returns one Decided event,
// Allowed or Denied with every reason that applies. The attempt is 1 before
// any execution and n+1 after attempt n ended NotApplied; the attempt's
// provider key follows the key policy and is recorded in the decision.
func (o *Operation) Decide(cmd Decide, now time.Time) ([]Event, error) {
	if !o.Exists() {
		return nil, refuse(ReasonOperationUnknown, "no such operation")
	}
	if _, err := ParseDecisionID(string(cmd.DecisionID)); err != nil {
		return nil, refuseID("decision_id", err)
	}
	if err := checkText("approver", cmd.Approver, MaxIDLength, true); err != nil {
		return nil, err
	}
	switch {
	case cmd.ApprovalLimitMinor < 0:
		return nil, refuseField("approval_limit_minor", "approval_limit_minor must not be negative")
	case cmd.Facts.RefundedMinor < 0:
		return nil, refuseField("facts.refunded_minor", "facts.refunded_minor must not be negative")
	case cmd.Facts.OrderTotalMinor < 0:
		return nil, refuseField("facts.order_total_minor", "facts.order_total_minor must not be negative")
	}
	policy := cmd.KeyPolicy
	if policy == "" {
		policy = KeyPerAttempt
	}
	if policy != KeyPerAttempt && policy != KeyReuseFirst {
		return nil, refuseField("key_policy", "unknown key policy %q", policy)
	}
	if err := o.blockingRefusal(); err != nil {
		return nil, err
	}
	attempt := o.NextAttempt()
	key := IdempotencyKeyFor(o.ID, attempt)
	if policy == KeyReuseFirst {
		key = IdempotencyKeyFor(o.ID, 1)
	}
	reasons := o.policyReasons(cmd)
	verdict := Allowed
	if len(reasons) > 0 {
		verdict = Denied
	}
	return []Event{Decided{
		DecisionID: cmd.DecisionID, Verdict: verdict, Reasons: reasons, Facts: cmd.Facts,
		Approver: cmd.Approver, ApprovalLimit: cmd.ApprovalLimitMinor, PolicyVersion: PolicyVersion,
		Attempt: attempt, KeyPolicy: policy, IdempotencyKey: key, DecidedAt: now,
	}}, nil
}

// policyReasons lists every rule of the policy the facts break.
func (o *Operation) policyReasons(cmd Decide) []string {
	var reasons []string
	if !cmd.Facts.OrderRefundable {
		reasons = append(reasons, string(ReasonPolicyOrderNotRefundable))
	}
	if o.AmountMinor > cmd.ApprovalLimitMinor {
		reasons = append(reasons, string(ReasonPolicyOverApprovalLimit))
	}
	if cmd.Facts.ChargebackOpen {
		reasons = append(reasons, string(ReasonPolicyChargebackOpen))
	}
	total := cmd.Facts.OrderTotalMinor
	if total == 0 {
		total = o.OrderTotalMinor
	}
	switch {
	case total == 0:
		reasons = append(reasons, string(ReasonPolicyOrderTotalMissing))
	case cmd.Facts.RefundedMinor+o.AmountMinor > total:
		reasons = append(reasons, string(ReasonPolicyExceedsOrderTotal))
	}
	return reasons
}

// blockingRefusal refuses anything that would start new work while an
// execution blocks it, or after the operation completed.
func (o *Operation) blockingRefusal() *Refusal {
	b := o.blockingExecution()
	if b == nil {
		return nil
	}
	return refuse(blockingReason(b.State), "execution %s is %s", b.ID, b.State)
}

// blockingExecution prefers a Completed execution, then any other blocker.
func (o *Operation) blockingExecution() *Execution {
	for _, e := range o.Executions {
		if e.State == ExecCompleted {
			return e
		}
	}
	return o.Blocking()
}

func blockingReason(s ExecutionState) Reason {
	switch s {
	case ExecCompleted:
		return ReasonOperationCompleted
	case ExecExecuting:
		return ReasonOperationExecuting
	default:
		return ReasonOperationOutcomeUnknown
	}
}

// checkText refuses free text that is too long, when required empty, or not
// printable UTF-8 (see CheckText).
func checkText(field, s string, max int, required bool) *Refusal {
	return CheckText(field, s, max, required)
}
