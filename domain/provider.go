package domain

import (
	"context"
	"time"
)

// Outcome is what an execution's side effect amounted to.
type Outcome string

const (
	// Completed: the provider reports the effect happened.
	Completed Outcome = "Completed"
	// NotApplied: there is affirmative evidence the provider did not perform
	// the effect (a documented rejection before execution, or a connection
	// that provably never carried the request).
	NotApplied Outcome = "NotApplied"
	// Unknown: it cannot be established whether the effect happened. Unknown
	// blocks any new execution until reconciliation resolves it.
	Unknown Outcome = "Unknown"
)

// Valid reports whether o is one of the three outcomes.
func (o Outcome) Valid() bool { return o == Completed || o == NotApplied || o == Unknown }

// Definite reports whether o is Completed or NotApplied.
func (o Outcome) Definite() bool { return o == Completed || o == NotApplied }

// RefundRequest is what a worker sends to a provider. Amount, currency and
// order come from the ledger, never from the message that triggered the work.
type RefundRequest struct {
	OperationID    OperationID
	OrderID        string
	AmountMinor    int64
	Currency       string
	IdempotencyKey IdempotencyKey
}

// RefundResult is a provider call classified into an Outcome.
type RefundResult struct {
	Outcome           Outcome
	ProviderReference string // the provider's refund id, when it gave one
	Detail            string // why, in words: status code, error class, provider message
}

// ProviderRefund is one refund as the provider's lookup reports it.
type ProviderRefund struct {
	ID             string
	OperationID    string
	IdempotencyKey string
	Status         string // "succeeded", "failed" or "pending"
	AmountMinor    int64
	Currency       string
	CreatedAt      time.Time
	FailureReason  string
}

// Provider is the port to the payment provider.
//
// CreateRefund never returns a bare error: every failure is classified into an
// Outcome (see docs/design.md, "Outcome classification"). It resends only with the
// same idempotency key, and starts no new send once ctx is done (ctx is the
// lease-loss context: cancelled the moment the worker's lease is lost).
//
// LookupRefunds asks the provider, without side effects, for refunds carrying
// our own reference (metadata operation_id). An error means the provider could
// not tell; the caller must not read it as "not found".
type Provider interface {
	CreateRefund(ctx context.Context, req RefundRequest) RefundResult
	LookupRefunds(ctx context.Context, op OperationID) ([]ProviderRefund, error)
}
