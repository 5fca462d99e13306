package codec

import (
	"fmt"
	"time"

	"opledger/domain"
)

// Version 1 of the four types that state an operation's kind and its use
// counts, frozen: OperationRequested, Decided, CapabilityIssued and Claimed
// as every build before operation kinds wrote them. Version 1 is a
// refund's: one use. Version 2 adds
// the kind and the use counts (docs/design.md, "Authority of bounded use"),
// which an older reader must never read past: a reader that treats every
// capability as single use would act on part of the event. These kinds
// write each event at the oldest version that can say it (WritesOldest): a
// refund's events are written as version 1, byte for byte what the builds
// before wrote, and an export download's as version 2, which the builds
// before refuse as written by a newer build. Never edit these types.

// operationRequestedV1 is OperationRequested version 1: a refund.
type operationRequestedV1 struct {
	OperationID     domain.OperationID   `json:"operation_id"`
	OrderID         string               `json:"order_id"`
	AmountMinor     int64                `json:"amount_minor"`
	Currency        string               `json:"currency"`
	OrderTotalMinor int64                `json:"order_total_minor,omitempty"`
	CorrelationID   domain.CorrelationID `json:"correlation_id"`
	RequestedBy     string               `json:"requested_by,omitempty"`
	RequestedAt     time.Time            `json:"requested_at"`
	RequestKey      string               `json:"request_key,omitempty"`
	RequestHash     string               `json:"request_hash,omitempty"`
}

func requestedV1toV2(v operationRequestedV1) (domain.OperationRequested, error) {
	return domain.OperationRequested{
		OperationID: v.OperationID, Kind: domain.KindRefund, OrderID: v.OrderID, AmountMinor: v.AmountMinor,
		Currency: v.Currency, OrderTotalMinor: v.OrderTotalMinor, CorrelationID: v.CorrelationID,
		RequestedBy: v.RequestedBy, RequestedAt: v.RequestedAt, RequestKey: v.RequestKey, RequestHash: v.RequestHash,
	}, nil
}

func requestedV2toV1(e domain.OperationRequested) (operationRequestedV1, error) {
	if !isRefund(e.Kind) || e.ExportID != "" {
		return operationRequestedV1{}, fmt.Errorf("version 1 is a refund's, not an operation of kind %q: %w", e.Kind, ErrNeedsNewerVersion)
	}
	return operationRequestedV1{
		OperationID: e.OperationID, OrderID: e.OrderID, AmountMinor: e.AmountMinor, Currency: e.Currency,
		OrderTotalMinor: e.OrderTotalMinor, CorrelationID: e.CorrelationID, RequestedBy: e.RequestedBy,
		RequestedAt: e.RequestedAt, RequestKey: e.RequestKey, RequestHash: e.RequestHash,
	}, nil
}

// factsV1 is domain.Facts as version 1 of Decided wrote it.
type factsV1 struct {
	OrderRefundable bool  `json:"order_refundable"`
	ChargebackOpen  bool  `json:"chargeback_open"`
	RefundedMinor   int64 `json:"refunded_minor"`
	OrderTotalMinor int64 `json:"order_total_minor,omitempty"`
}

// decidedV1 is Decided version 1: a refund's decision, one use.
type decidedV1 struct {
	DecisionID     domain.DecisionID     `json:"decision_id"`
	Verdict        domain.Verdict        `json:"verdict"`
	Reasons        []string              `json:"reasons,omitempty"`
	Facts          factsV1               `json:"facts"`
	Approver       string                `json:"approver"`
	ApprovalLimit  int64                 `json:"approval_limit_minor"`
	PolicyVersion  string                `json:"policy_version"`
	Attempt        int                   `json:"attempt"`
	KeyPolicy      domain.KeyPolicy      `json:"key_policy"`
	IdempotencyKey domain.IdempotencyKey `json:"idempotency_key"`
	DecidedAt      time.Time             `json:"decided_at"`
}

func decidedV1toV2(v decidedV1) (domain.Decided, error) {
	return domain.Decided{
		DecisionID: v.DecisionID, Kind: domain.KindRefund, Verdict: v.Verdict, Reasons: v.Reasons,
		Facts: domain.Facts{OrderRefundable: v.Facts.OrderRefundable, ChargebackOpen: v.Facts.ChargebackOpen,
			RefundedMinor: v.Facts.RefundedMinor, OrderTotalMinor: v.Facts.OrderTotalMinor},
		Approver: v.Approver, ApprovalLimit: v.ApprovalLimit, PolicyVersion: v.PolicyVersion, Attempt: v.Attempt, Uses: 1,
		KeyPolicy: v.KeyPolicy, IdempotencyKey: v.IdempotencyKey, DecidedAt: v.DecidedAt,
	}, nil
}

func decidedV2toV1(e domain.Decided) (decidedV1, error) {
	if !isRefund(e.Kind) || !singleUse(e.Uses) || e.ExportFacts != nil {
		return decidedV1{}, fmt.Errorf("version 1 is a single-use refund's decision, not one of kind %q for %d uses: %w", e.Kind, e.Uses, ErrNeedsNewerVersion)
	}
	return decidedV1{
		DecisionID: e.DecisionID, Verdict: e.Verdict, Reasons: e.Reasons,
		Facts: factsV1{OrderRefundable: e.Facts.OrderRefundable, ChargebackOpen: e.Facts.ChargebackOpen,
			RefundedMinor: e.Facts.RefundedMinor, OrderTotalMinor: e.Facts.OrderTotalMinor},
		Approver: e.Approver, ApprovalLimit: e.ApprovalLimit, PolicyVersion: e.PolicyVersion, Attempt: e.Attempt,
		KeyPolicy: e.KeyPolicy, IdempotencyKey: e.IdempotencyKey, DecidedAt: e.DecidedAt,
	}, nil
}

// capabilityIssuedV1 is CapabilityIssued version 1: single-use authority.
type capabilityIssuedV1 struct {
	CapabilityID domain.CapabilityID `json:"capability_id"`
	DecisionID   domain.DecisionID   `json:"decision_id"`
	Attempt      int                 `json:"attempt"`
	IssuedAt     time.Time           `json:"issued_at"`
	ExpiresAt    time.Time           `json:"expires_at"`
}

func issuedV1toV2(v capabilityIssuedV1) (domain.CapabilityIssued, error) {
	return domain.CapabilityIssued{
		CapabilityID: v.CapabilityID, DecisionID: v.DecisionID, Kind: domain.KindRefund, Attempt: v.Attempt, Uses: 1,
		IssuedAt: v.IssuedAt, ExpiresAt: v.ExpiresAt,
	}, nil
}

func issuedV2toV1(e domain.CapabilityIssued) (capabilityIssuedV1, error) {
	if !isRefund(e.Kind) || !singleUse(e.Uses) {
		return capabilityIssuedV1{}, fmt.Errorf("version 1 is single-use authority, not %d uses of kind %q: %w", e.Uses, e.Kind, ErrNeedsNewerVersion)
	}
	return capabilityIssuedV1{
		CapabilityID: e.CapabilityID, DecisionID: e.DecisionID, Attempt: e.Attempt, IssuedAt: e.IssuedAt, ExpiresAt: e.ExpiresAt,
	}, nil
}

// claimedV1 is Claimed version 1: the one use of a single-use capability.
type claimedV1 struct {
	ExecutionID       domain.ExecutionID    `json:"execution_id"`
	CapabilityID      domain.CapabilityID   `json:"capability_id"`
	MessageID         domain.MessageID      `json:"message_id"`
	WorkerID          string                `json:"worker_id"`
	Attempt           int                   `json:"attempt"`
	LeaseEpoch        int64                 `json:"lease_epoch"`
	LeaseExpiresAt    time.Time             `json:"lease_expires_at"`
	IdempotencyKey    domain.IdempotencyKey `json:"idempotency_key"`
	ClaimedAt         time.Time             `json:"claimed_at"`
	LeaseSecretDigest string                `json:"lease_secret_digest,omitempty"`
}

func claimedV1toV2(v claimedV1) (domain.Claimed, error) {
	return domain.Claimed{
		ExecutionID: v.ExecutionID, CapabilityID: v.CapabilityID, Kind: domain.KindRefund, MessageID: v.MessageID,
		WorkerID: v.WorkerID, Attempt: v.Attempt, Use: 1, LeaseEpoch: v.LeaseEpoch, LeaseExpiresAt: v.LeaseExpiresAt,
		IdempotencyKey: v.IdempotencyKey, ClaimedAt: v.ClaimedAt, LeaseSecretDigest: v.LeaseSecretDigest,
	}, nil
}

func claimedV2toV1(e domain.Claimed) (claimedV1, error) {
	if !isRefund(e.Kind) || !singleUse(e.Use) {
		return claimedV1{}, fmt.Errorf("version 1 is the one use of single-use authority, not use %d of kind %q: %w", e.Use, e.Kind, ErrNeedsNewerVersion)
	}
	return claimedV1{
		ExecutionID: e.ExecutionID, CapabilityID: e.CapabilityID, MessageID: e.MessageID, WorkerID: e.WorkerID,
		Attempt: e.Attempt, LeaseEpoch: e.LeaseEpoch, LeaseExpiresAt: e.LeaseExpiresAt, IdempotencyKey: e.IdempotencyKey,
		ClaimedAt: e.ClaimedAt, LeaseSecretDigest: e.LeaseSecretDigest,
	}, nil
}

// isRefund: the kind version 1 holds ("" is an event built without a
// kind, as every event was before kinds existed: a refund's).
func isRefund(k domain.OperationKind) bool { return k == "" || k == domain.KindRefund }

// singleUse: the use count version 1 holds (0: unstated, one).
func singleUse(n int) bool { return n == 0 || n == 1 }
