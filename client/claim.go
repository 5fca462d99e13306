package client

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Message is one delivery of the team's own queue: identifiers only. What to
// execute comes from the ledger's answer to the claim, never the message.
type Message struct {
	MessageID   string `json:"message_id"`
	OperationID string `json:"operation_id"`
	// Capability is the capability token the decision answered.
	Capability string `json:"capability"`
	// CorrelationID is optional.
	CorrelationID string `json:"correlation_id,omitempty"`
}

// ClaimStatus is the ledger's answer to a presentation (docs/api.md,
// "POST /v1/claims").
type ClaimStatus string

const (
	// Claimed: one use of the capability is consumed and an execution
	// opened: execute once.
	Claimed ClaimStatus = "Claimed"
	// DuplicateDelivery: this message was already seen on this operation.
	// Do nothing: the first delivery's execution owns the work.
	DuplicateDelivery ClaimStatus = "DuplicateDelivery"
	// AlreadyConsumed: the authority is spent (replay suspected when the
	// message is new).
	AlreadyConsumed ClaimStatus = "AlreadyConsumed"
	Expired         ClaimStatus = "Expired"
	Revoked         ClaimStatus = "Revoked"
	// Invalid: a forged or altered token, another operation's or attempt's,
	// a superseded decision, an unknown operation.
	Invalid ClaimStatus = "Invalid"
	// OperationNotExecutable: another execution blocks; nothing was spent.
	OperationNotExecutable ClaimStatus = "OperationNotExecutable"
)

// The reasons a claim answers with (domain/reasons.go).
const (
	ReasonDeliveryDuplicate         = "delivery.duplicate"
	ReasonCapabilityAlreadyConsumed = "capability.already-consumed"
	ReasonCapabilityExpired         = "capability.expired"
	ReasonCapabilityRevoked         = "capability.revoked"
	ReasonCapabilityInvalid         = "capability.invalid"
	ReasonCapabilityWrongOperation  = "capability.wrong-operation"
	ReasonCapabilityWrongAttempt    = "capability.wrong-attempt"
	ReasonCapabilitySuperseded      = "capability.superseded"
	ReasonOperationUnknown          = "operation.unknown"
	ReasonOperationExecuting        = "operation.executing"
	ReasonOperationOutcomeUnknown   = "operation.outcome-unknown"
	ReasonOperationCompleted        = "operation.completed"
)

// ClaimAnswer is a claim the ledger answered and recorded (HTTP 200).
// Every answer may be acknowledged to the queue; only Claimed executes.
type ClaimAnswer struct {
	Status ClaimStatus
	// Reason and Detail say why, for everything but Claimed.
	Reason, Detail string
	// ReplaySuspected: spent authority presented on a new message.
	ReplaySuspected bool
	// ExecutionAttempted is always false: the API executes nothing.
	ExecutionAttempted bool
	// ExecutionID and ExecutionState: the execution opened (Claimed) or the
	// operation's current one as the presentation found it.
	ExecutionID, ExecutionState string
	OperationID                 string
	// Execution is what to execute and the lease to hold; non-nil exactly
	// when Status is Claimed.
	Execution *Execution
}

// claimAnswer is the wire shape of a claim's answer.
type claimAnswer struct {
	Status             ClaimStatus `json:"status"`
	Reason             string      `json:"reason"`
	Detail             string      `json:"detail"`
	ExecutionAttempted bool        `json:"execution_attempted"`
	ReplaySuspected    bool        `json:"replay_suspected"`
	ExecutionID        string      `json:"execution_id"`
	ExecutionState     string      `json:"execution_state"`
	LeaseEpoch         int64       `json:"lease_epoch"`
	LeaseExpiresAt     *time.Time  `json:"lease_expires_at"`
	LeaseSecret        string      `json:"lease_secret"`
	IdempotencyKey     string      `json:"idempotency_key"`
	Kind               string      `json:"kind"`
	Use                int         `json:"use"`
	UsesLeft           *int        `json:"uses_left"`
	AmountMinor        int64       `json:"amount_minor"`
	Currency           string      `json:"currency"`
	OrderID            string      `json:"order_id"`
	ExportID           string      `json:"export_id"`
	OperationID        string      `json:"operation_id"`
}

// Claim presents m's capability: POST /v1/claims. It is sent once, never
// retried: a claim whose answer is lost leaves its execution to lapse to
// Unknown (its lease secret is lost with the answer), and a claim sent
// again on the same message is DuplicateDelivery.
//
// An error means the claim was not answered as recorded: nothing may
// execute, and the message must not be acknowledged (let the queue deliver
// it again). errors.Is(err, ErrStoreUnavailable) or ErrNoAnswer: try later;
// ErrRequestInvalid (with Field): the message is malformed, dead-letter it.
func (c *Client) Claim(ctx context.Context, m Message) (ClaimAnswer, error) {
	body := map[string]any{
		"message_id": m.MessageID, "operation_id": m.OperationID, "capability": m.Capability,
		"worker_id": c.cfg.WorkerID, "lease_seconds": int64(c.cfg.LeaseDuration / time.Second),
	}
	if m.CorrelationID != "" {
		body["correlation_id"] = m.CorrelationID
	}
	var a claimAnswer
	sent := c.cfg.Now()
	if err := c.do(ctx, "POST", "/v1/claims", mustJSON(body), &a); err != nil {
		return ClaimAnswer{}, fmt.Errorf("claim %s: %w", m.MessageID, err)
	}
	out := ClaimAnswer{
		Status: a.Status, Reason: a.Reason, Detail: a.Detail, ReplaySuspected: a.ReplaySuspected,
		ExecutionAttempted: a.ExecutionAttempted, ExecutionID: a.ExecutionID, ExecutionState: a.ExecutionState,
		OperationID: a.OperationID,
	}
	switch a.Status {
	case Claimed:
		exe, err := a.execution()
		if err != nil {
			// A Claimed answer we cannot hold: the use is spent and the
			// lease will lapse to Unknown; nothing is sent.
			return ClaimAnswer{}, fmt.Errorf("claim %s: %w: %v", m.MessageID, errUnexpectedResponse, err)
		}
		exe.setExpiry(*a.LeaseExpiresAt, sent.Add(c.cfg.LeaseDuration))
		out.Execution = exe
	case DuplicateDelivery, AlreadyConsumed, Expired, Revoked, Invalid, OperationNotExecutable:
	default:
		return ClaimAnswer{}, fmt.Errorf("claim %s: %w: status %q", m.MessageID, errUnexpectedResponse, a.Status)
	}
	return out, nil
}

func (a claimAnswer) execution() (*Execution, error) {
	switch {
	case a.ExecutionID == "" || a.OperationID == "" || a.IdempotencyKey == "":
		return nil, errors.New("Claimed without execution_id, operation_id or idempotency_key")
	case a.LeaseEpoch < 1 || a.LeaseExpiresAt == nil:
		return nil, errors.New("Claimed without a lease epoch or expiry")
	case a.LeaseSecret == "":
		return nil, errors.New("Claimed without a lease_secret")
	case a.Kind != KindRefund && a.Kind != KindExportDownload:
		return nil, fmt.Errorf("Claimed an operation of kind %q this client does not know", a.Kind)
	}
	left := 0
	if a.UsesLeft != nil {
		left = *a.UsesLeft
	}
	x := &Execution{
		ExecutionID: a.ExecutionID, OperationID: a.OperationID, Kind: a.Kind, LeaseEpoch: a.LeaseEpoch,
		IdempotencyKey: a.IdempotencyKey, Use: a.Use, UsesLeft: left,
		AmountMinor: a.AmountMinor, Currency: a.Currency, OrderID: a.OrderID, ExportID: a.ExportID,
		secret: func() string { return a.LeaseSecret },
	}
	return x, nil
}
