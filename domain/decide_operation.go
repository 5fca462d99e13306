package domain

import "time"

// Request decides RequestOperation. Every text the command carries is
// checked before anything is recorded, and a refusal names the field at
// fault (the API's names: kind, order_id, amount_minor, export_id, ...): a
// refund names its order, amount and currency and no export; an export
// download names its export and none of a refund's fields.
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
	p, ok := PolicyOf(cmd.Kind)
	if !ok {
		return nil, refuseField("kind", "kind %q is not one of %v", clip(string(cmd.Kind)), Kinds())
	}
	if err := validateSubject(p.Kind, cmd); err != nil {
		return nil, err
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
		OperationID: cmd.OperationID, Kind: p.Kind, ExportID: cmd.ExportID, OrderID: cmd.OrderID, AmountMinor: cmd.AmountMinor,
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

// validateSubject checks what the operation is about, by kind.
func validateSubject(kind OperationKind, cmd RequestOperation) error {
	if kind == KindExportDownload {
		if err := checkChars("export id", cmd.ExportID, true); err != nil {
			return refuseID("export_id", err)
		}
		for _, f := range []struct {
			field string
			set   bool
		}{{"order_id", cmd.OrderID != ""}, {"amount_minor", cmd.AmountMinor != 0}, {"currency", cmd.Currency != ""}, {"order_total_minor", cmd.OrderTotalMinor != 0}} {
			if f.set {
				return refuseField(f.field, "%s is a refund's; an %s operation names its export_id only", f.field, kind)
			}
		}
		return nil
	}
	if cmd.ExportID != "" {
		return refuseField("export_id", "export_id is an %s's; a %s names its order, amount and currency", KindExportDownload, kind)
	}
	if err := validateOrder(cmd.OrderID, cmd.AmountMinor, cmd.Currency); err != nil {
		return err
	}
	if cmd.OrderTotalMinor < 0 {
		return refuseField("order_total_minor", "order_total_minor must not be negative")
	}
	return nil
}

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

// Decide evaluates the policy of the operation's kind (PolicyVersion,
// ExportPolicyVersion) for the next attempt.
//
// It is refused while an execution blocks a new one under the kind's
// effect policy (the outcome must be known first), and, for a single-use
// kind, after completion. Otherwise it returns one Decided event, Allowed or
// Denied with every reason that applies, and the uses it authorizes. The
// attempt is 1 before any execution and n+1 after an execution of attempt
// n; the attempt's provider key follows the key policy and is recorded in
// the decision (each use's key derives from it). A kind of bounded use
// takes per-attempt keys only: under reused keys a later attempt's use
// would share an earlier attempt's key.
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
	uses, err := o.validateDecide(cmd)
	if err != nil {
		return nil, err
	}
	policy := cmd.KeyPolicy
	if policy == "" {
		policy = KeyPerAttempt
	}
	switch {
	case policy != KeyPerAttempt && policy != KeyReuseFirst:
		return nil, refuseField("key_policy", "unknown key policy %q", clip(string(policy)))
	case o.Policy.Repeats && policy != KeyPerAttempt:
		return nil, refuseField("key_policy", "an %s decision takes %s keys: under reused keys a later attempt's use would share an earlier one's key", o.Kind, KeyPerAttempt)
	}
	if err := o.blockingRefusal(); err != nil {
		return nil, err
	}
	attempt := o.NextAttempt()
	key := o.Policy.AttemptKey(o.ID, attempt)
	if policy == KeyReuseFirst {
		key = o.Policy.AttemptKey(o.ID, 1)
	}
	var reasons []string
	ev := Decided{
		DecisionID: cmd.DecisionID, Kind: o.Kind, Approver: cmd.Approver, PolicyVersion: o.Policy.PolicyVersion,
		Attempt: attempt, Uses: uses, KeyPolicy: policy, IdempotencyKey: key, DecidedAt: now,
	}
	if o.Kind == KindExportDownload {
		facts := cmd.ExportFacts
		ev.ExportFacts = &facts
		reasons = exportPolicyReasons(facts)
	} else {
		ev.Facts, ev.ApprovalLimit = cmd.Facts, cmd.ApprovalLimitMinor
		reasons = o.policyReasons(cmd)
	}
	ev.Verdict, ev.Reasons = Allowed, reasons
	if len(reasons) > 0 {
		ev.Verdict = Denied
	}
	return []Event{ev}, nil
}

// validateDecide checks the facts of the operation's kind (those of another
// kind must be zero) and returns the uses the decision authorizes.
func (o *Operation) validateDecide(cmd Decide) (int, error) {
	if o.Kind == KindExportDownload {
		switch {
		case cmd.ApprovalLimitMinor != 0:
			return 0, refuseField("approval_limit_minor", "approval_limit_minor is a refund's; an %s decision has none", o.Kind)
		case cmd.Facts != Facts{}:
			return 0, refuseField("facts", "an %s decision states the export's facts (export_ready), not a refund's", o.Kind)
		}
	} else {
		switch {
		case cmd.ExportFacts != ExportFacts{}:
			return 0, refuseField("facts.export_ready", "facts.export_ready is an %s's; a %s decision states the order's facts", KindExportDownload, o.Kind)
		case cmd.ApprovalLimitMinor < 0:
			return 0, refuseField("approval_limit_minor", "approval_limit_minor must not be negative")
		case cmd.Facts.RefundedMinor < 0:
			return 0, refuseField("facts.refunded_minor", "facts.refunded_minor must not be negative")
		case cmd.Facts.OrderTotalMinor < 0:
			return 0, refuseField("facts.order_total_minor", "facts.order_total_minor must not be negative")
		}
	}
	switch maxUses := o.Policy.MaxUses; {
	case cmd.Uses == 0 && !o.Policy.Repeats:
		return 1, nil
	case cmd.Uses == 0:
		return 0, refuseField("uses", "uses is required: how many times the %s may take place under this decision, 1 to %d", o.Kind, maxUses)
	case cmd.Uses < 1 || cmd.Uses > maxUses:
		if maxUses == 1 {
			return 0, refuseField("uses", "a %s is single use: uses must be 1, got %d", o.Kind, cmd.Uses)
		}
		return 0, refuseField("uses", "uses must be 1 to %d for an %s, got %d", maxUses, o.Kind, cmd.Uses)
	}
	return cmd.Uses, nil
}

// exportPolicyReasons lists every rule of the export policy the facts
// break.
func exportPolicyReasons(f ExportFacts) []string {
	if !f.ExportReady {
		return []string{string(ReasonPolicyExportNotReady)}
	}
	return nil
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
// execution blocks it, or, for a single-use kind, after the operation
// completed.
func (o *Operation) blockingRefusal() *Refusal {
	b := o.blockingExecution()
	if b == nil {
		return nil
	}
	return refuse(blockingReason(b.State), "execution %s is %s", b.ID, b.State)
}

// blockingExecution prefers a Completed execution, then any other blocker;
// for a kind of bounded use, only an open execution blocks.
func (o *Operation) blockingExecution() *Execution {
	if o.Policy.Repeats {
		return o.Blocking()
	}
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
