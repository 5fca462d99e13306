package domain

import (
	"context"
	"errors"
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

// EffectResult is an executor's call (a refund, an export delivery)
// classified into an Outcome.
type EffectResult struct {
	Outcome           Outcome
	ProviderReference string // the provider's id of the effect (a refund, a delivery), when it gave one
	Detail            string // why, in words: status code, error class, provider message
}

// RefundResult is the EffectResult of a refund (the Provider port's name
// for it).
type RefundResult = EffectResult

// EffectState is what a provider's read says of one effect, in the model's
// words. An adapter maps its provider's statuses onto these four; the model
// never sees a provider's own status.
type EffectState string

const (
	// EffectApplied: the provider reports the effect took place.
	EffectApplied EffectState = "applied"
	// EffectNotApplied: the provider reports the effect will not take
	// place (failed, declined, cancelled): nothing moved.
	EffectNotApplied EffectState = "not-applied"
	// EffectInProgress: the provider has not settled it yet; ask again.
	EffectInProgress EffectState = "in-progress"
	// EffectUnknown: the provider's status says neither (a status its
	// adapter does not document). Never read as applied or not applied.
	EffectUnknown EffectState = "unknown"
)

// Valid reports whether s is one of the four states.
func (s EffectState) Valid() bool {
	return s == EffectApplied || s == EffectNotApplied || s == EffectInProgress || s == EffectUnknown
}

// ProviderEffect is one effect (for refunds: one refund) as a provider's
// read reports it.
type ProviderEffect struct {
	// Reference is the provider's own id of the effect.
	Reference string
	// OperationID is our reference as the provider holds it; empty when the
	// provider's answer does not carry it.
	OperationID OperationID
	// IdempotencyKey is the key the effect was made under; empty when the
	// provider's answer does not say.
	IdempotencyKey IdempotencyKey
	State          EffectState
	AmountMinor    int64
	Currency       string
	// ExportID is the export an export delivery delivered (empty for a
	// refund, or when the answer does not carry it).
	ExportID  string
	CreatedAt time.Time
	// Detail is the provider's own words: its status, a failure reason.
	// Hostile text: quote it escaped (EvidenceText).
	Detail string
}

// ErrReadUnsupported is returned by a Provider read the provider does not
// offer (see ProviderProfile): the caller must treat it as "cannot tell".
var ErrReadUnsupported = errors.New("the provider does not offer this read")

// Provider is the port to the payment provider.
//
// CreateRefund never returns a bare error: every failure is classified into an
// Outcome (see docs/design.md, "Outcome classification"). It resends only with the
// same idempotency key, and starts no new send once ctx is done (ctx is the
// lease-loss context: cancelled the moment the worker's lease is lost).
//
// The reads have no side effect. An error means the provider could not tell
// (the caller must never read it as "not found"); a read the provider does
// not offer returns ErrReadUnsupported without asking anything.
//
//   - LookupByReference returns the effects the provider holds under our own
//     reference (the profile's ReferenceField), possibly none.
//   - RetrieveByKey returns the effect made under key, and found = false
//     when the provider affirmatively holds none (within its key retention,
//     nothing was committed under the key).
type Provider interface {
	CreateRefund(ctx context.Context, req RefundRequest) RefundResult
	LookupByReference(ctx context.Context, op OperationID) ([]ProviderEffect, error)
	RetrieveByKey(ctx context.Context, key IdempotencyKey) (effect ProviderEffect, found bool, err error)
}
