package domain

import "time"

// Event is one fact in an operation's stream. Events are immutable; each has a
// stable type name (EventType) that is stored beside its JSON encoding and a
// schema version per type, stamped in its metadata. The registry in
// domain/codec (registry.go) lists every type with its versions and is the
// one place that reads and writes them; see docs/design.md, "Event
// compatibility", before changing a type here.
type Event interface {
	EventType() string
}

// Stable event type names. Never rename one: stored history refers to them.
// A new type is registered in domain/codec/registry.go.
const (
	TypeOperationRequested   = "OperationRequested"
	TypeDecided              = "Decided"
	TypeCapabilityIssued     = "CapabilityIssued"
	TypeCapabilityRevoked    = "CapabilityRevoked"
	TypeClaimed              = "Claimed"
	TypeDeliveryDuplicated   = "DeliveryDuplicated"
	TypePresentationRejected = "PresentationRejected"
	TypeLeaseRenewed         = "LeaseRenewed"
	TypeOutcomeRecorded      = "OutcomeRecorded"
	TypeOutcomeUnknown       = "OutcomeUnknown"
	TypeLeaseLapsed          = "LeaseLapsed"
	TypeLateOutcomeRecorded  = "LateOutcomeRecorded"
	TypeReconciled           = "Reconciled"
	TypeEscalated            = "Escalated"
	TypeWriteRefused         = "WriteRefused"
	TypeRefusalsSummarized   = "RefusalsSummarized"
)

// OperationRequested opens an operation's stream. Its kind says what the
// effect is (a refund: order, amount and currency; an export download: the
// export). Version 2 (kind required); a refund is written as version 1,
// which has no kind, byte for byte what builds before kinds wrote (see
// domain/codec, history_kinds.go).
type OperationRequested struct {
	OperationID OperationID   `json:"operation_id"`
	Kind        OperationKind `json:"kind"`
	// OrderID, AmountMinor, Currency and OrderTotalMinor are a refund's.
	OrderID         string `json:"order_id,omitempty"`
	AmountMinor     int64  `json:"amount_minor,omitempty"`
	Currency        string `json:"currency,omitempty"`
	OrderTotalMinor int64  `json:"order_total_minor,omitempty"`
	// ExportID is an export download's: the generated export to deliver.
	ExportID      string        `json:"export_id,omitempty"`
	CorrelationID CorrelationID `json:"correlation_id"`
	RequestedBy   string        `json:"requested_by,omitempty"`
	RequestedAt   time.Time     `json:"requested_at"`
	// RequestKey and RequestHash are the caller's Idempotency-Key and a hash
	// of its request body, when the operation was requested over the API: a
	// repeat with the same key is answered from them.
	RequestKey  string `json:"request_key,omitempty"`
	RequestHash string `json:"request_hash,omitempty"`
}

// Verdict is the result of one policy evaluation.
type Verdict string

const (
	Allowed Verdict = "Allowed"
	Denied  Verdict = "Denied"
)

// Facts are what the caller asserts about the order at decision time (a
// refund's facts). The policy decides on them; the decision records them.
type Facts struct {
	OrderRefundable bool  `json:"order_refundable"`
	ChargebackOpen  bool  `json:"chargeback_open"`
	RefundedMinor   int64 `json:"refunded_minor"`
	// OrderTotalMinor overrides the total given when the operation was
	// requested; 0 means "use the operation's".
	OrderTotalMinor int64 `json:"order_total_minor,omitempty"`
}

// KeyPolicy says how attempt n+1's provider key relates to attempt n's. It
// follows the provider's documented semantics and is recorded in the decision.
type KeyPolicy string

const (
	// KeyPerAttempt: every attempt has its own key (refund-OP-a1, -a2, ...).
	// Right for providers that replay a saved error under a reused key
	// (Stripe API v1).
	KeyPerAttempt KeyPolicy = "per-attempt"
	// KeyReuseFirst: every attempt reuses attempt 1's key. Right for providers
	// that re-execute a failed request under the same key (Stripe API v2).
	KeyReuseFirst KeyPolicy = "reuse-first"
)

// ExportFacts are what the caller asserts about an export at decision time
// (an export download's facts).
type ExportFacts struct {
	// ExportReady: the export has been generated and may be delivered.
	ExportReady bool `json:"export_ready"`
}

// Decided records one policy evaluation for an attempt: its kind, the facts
// of that kind, and the uses it authorizes. Version 2 (kind and uses
// required); a refund's is written as version 1, which has neither (one
// use), byte for byte what builds before kinds wrote.
type Decided struct {
	DecisionID DecisionID    `json:"decision_id"`
	Kind       OperationKind `json:"kind"`
	Verdict    Verdict       `json:"verdict"`
	Reasons    []string      `json:"reasons,omitempty"`
	// Facts are a refund's facts; ExportFacts an export download's.
	Facts         Facts        `json:"facts,omitzero"`
	ExportFacts   *ExportFacts `json:"export_facts,omitempty"`
	Approver      string       `json:"approver"`
	ApprovalLimit int64        `json:"approval_limit_minor,omitempty"`
	PolicyVersion string       `json:"policy_version"`
	Attempt       int          `json:"attempt"`
	// Uses is how many uses the decision authorizes: 1 for a refund, 1 to
	// MaxUses of its kind for a kind of bounded use.
	Uses      int       `json:"uses"`
	KeyPolicy KeyPolicy `json:"key_policy"`
	// IdempotencyKey is the attempt's provider key; each use's key derives
	// from it (EffectPolicy.UseKey).
	IdempotencyKey IdempotencyKey `json:"idempotency_key"`
	DecidedAt      time.Time      `json:"decided_at"`
}

// CapabilityIssued records authority of Uses uses bound to one operation,
// one decision and one attempt. Version 2 (kind and uses required, the use
// count must never be read past); a refund's single-use capability is
// written as version 1, byte for byte what builds before kinds wrote.
type CapabilityIssued struct {
	CapabilityID CapabilityID  `json:"capability_id"`
	DecisionID   DecisionID    `json:"decision_id"`
	Kind         OperationKind `json:"kind"`
	Attempt      int           `json:"attempt"`
	Uses         int           `json:"uses"`
	IssuedAt     time.Time     `json:"issued_at"`
	ExpiresAt    time.Time     `json:"expires_at"`
}

// CapabilityRevoked withdraws unused authority.
type CapabilityRevoked struct {
	CapabilityID CapabilityID `json:"capability_id"`
	Reason       string       `json:"reason,omitempty"`
	RevokedBy    string       `json:"revoked_by,omitempty"`
	RevokedAt    time.Time    `json:"revoked_at"`
}

// Claimed consumes one use of a capability and opens an execution under a
// lease. Version 2 (kind and use required); a refund's claim is written as
// version 1 (its one use), byte for byte what builds before kinds wrote.
type Claimed struct {
	ExecutionID  ExecutionID   `json:"execution_id"`
	CapabilityID CapabilityID  `json:"capability_id"`
	Kind         OperationKind `json:"kind"`
	MessageID    MessageID     `json:"message_id"`
	WorkerID     string        `json:"worker_id"`
	Attempt      int           `json:"attempt"`
	// Use is which use of the capability the claim consumed, from 1.
	Use            int            `json:"use"`
	LeaseEpoch     int64          `json:"lease_epoch"`
	LeaseExpiresAt time.Time      `json:"lease_expires_at"`
	IdempotencyKey IdempotencyKey `json:"idempotency_key"`
	ClaimedAt      time.Time      `json:"claimed_at"`
	// LeaseSecretDigest binds the lease to its holder: the SHA-256 of the
	// lease secret the claim handed its executor, in lower-case hex (see
	// LeaseSecretDigest). The secret itself is never recorded. Empty only on
	// claims recorded before leases were bound to their holder: such an
	// execution accepts no executor write.
	LeaseSecretDigest string `json:"lease_secret_digest,omitempty"`
}

// DeliveryDuplicated records a message id seen again on this operation. It
// reports the execution's state at that moment and changes nothing.
type DeliveryDuplicated struct {
	MessageID      MessageID      `json:"message_id"`
	CapabilityID   CapabilityID   `json:"capability_id,omitempty"`
	WorkerID       string         `json:"worker_id,omitempty"`
	ExecutionID    ExecutionID    `json:"execution_id,omitempty"`
	ExecutionState ExecutionState `json:"execution_state,omitempty"`
	SeenAt         time.Time      `json:"seen_at"`
}

// PresentationRejected records a refused presentation of authority. Execution
// was not attempted. ReplaySuspected marks spent authority arriving on a
// message id this operation has not seen.
type PresentationRejected struct {
	Status             ClaimStatus  `json:"status"`
	Reason             Reason       `json:"reason"`
	MessageID          MessageID    `json:"message_id"`
	CapabilityID       CapabilityID `json:"capability_id,omitempty"`
	OperationID        OperationID  `json:"operation_id"`
	WorkerID           string       `json:"worker_id,omitempty"`
	ExecutionID        ExecutionID  `json:"execution_id,omitempty"` // the execution that blocked it, if any
	ExecutionAttempted bool         `json:"execution_attempted"`    // always false
	ReplaySuspected    bool         `json:"replay_suspected"`
	Detail             string       `json:"detail,omitempty"`
	RejectedAt         time.Time    `json:"rejected_at"`
}

// LeaseRenewed extends the lease of an executing execution under its epoch.
type LeaseRenewed struct {
	ExecutionID    ExecutionID `json:"execution_id"`
	LeaseEpoch     int64       `json:"lease_epoch"`
	LeaseExpiresAt time.Time   `json:"lease_expires_at"`
	RenewedAt      time.Time   `json:"renewed_at"`
}

// OutcomeRecorded is the executor's definite result, under its lease epoch.
type OutcomeRecorded struct {
	ExecutionID       ExecutionID `json:"execution_id"`
	LeaseEpoch        int64       `json:"lease_epoch"`
	Outcome           Outcome     `json:"outcome"` // Completed or NotApplied
	ProviderReference string      `json:"provider_reference,omitempty"`
	Detail            string      `json:"detail,omitempty"`
	RecordedAt        time.Time   `json:"recorded_at"`
}

// OutcomeUnknown is the executor's own ambiguous result, under its epoch.
type OutcomeUnknown struct {
	ExecutionID ExecutionID `json:"execution_id"`
	LeaseEpoch  int64       `json:"lease_epoch"`
	Cause       string      `json:"cause"`
	RecordedAt  time.Time   `json:"recorded_at"`
}

// LeaseLapsed moves an execution whose lease expired to Unknown and raises
// its epoch, fencing the executor that held it.
type LeaseLapsed struct {
	ExecutionID    ExecutionID `json:"execution_id"`
	FromEpoch      int64       `json:"from_epoch"`
	ToEpoch        int64       `json:"to_epoch"`
	LeaseExpiredAt time.Time   `json:"lease_expired_at"`
	LapsedAt       time.Time   `json:"lapsed_at"`
}

// LateOutcomeRecorded is a stale executor's evidence about the request it
// already sent: it moves only its own Unknown execution to a definite outcome.
type LateOutcomeRecorded struct {
	ExecutionID       ExecutionID `json:"execution_id"`
	StaleEpoch        int64       `json:"stale_epoch"`
	Outcome           Outcome     `json:"outcome"`
	ProviderReference string      `json:"provider_reference,omitempty"`
	Detail            string      `json:"detail,omitempty"`
	RecordedAt        time.Time   `json:"recorded_at"`
}

// ReconcileMethod says how an Unknown was resolved.
type ReconcileMethod string

const (
	// MethodProviderLookup: the provider was asked by our own reference.
	MethodProviderLookup ReconcileMethod = "provider-lookup"
	// MethodProviderResend: the original request was resent under the
	// original key, where the provider profile documents that as safe.
	MethodProviderResend ReconcileMethod = "provider-resend"
	// MethodOperator: a person resolved it with evidence.
	MethodOperator ReconcileMethod = "operator"
)

// Reconciled resolves an Unknown or Escalated execution to a definite outcome.
type Reconciled struct {
	ExecutionID       ExecutionID     `json:"execution_id"`
	Outcome           Outcome         `json:"outcome"`
	Method            ReconcileMethod `json:"method"`
	ProviderReference string          `json:"provider_reference,omitempty"`
	Actor             string          `json:"actor,omitempty"`
	Evidence          string          `json:"evidence,omitempty"`
	ReconciledAt      time.Time       `json:"reconciled_at"`
}

// Escalated hands an Unknown execution to a person. For deciding whether a
// new execution may start, an Escalated execution is still Unknown.
type Escalated struct {
	ExecutionID ExecutionID `json:"execution_id"`
	Reason      string      `json:"reason"`
	Detail      string      `json:"detail,omitempty"`
	EscalatedAt time.Time   `json:"escalated_at"`
}

// WriteRefused records an executor's write that was refused: malformed or
// hostile fields, a stale lease epoch, a missing or wrong lease secret, an
// execution not in the state the write needs. It changes nothing; it keeps
// what the executor tried to say, which may be evidence. Text that could not
// be stored as sent (control characters, invalid UTF-8, too long) is kept
// escaped and cut by EvidenceText, and Escaped names those fields. The
// presented lease secret is never recorded, only how it compared.
type WriteRefused struct {
	ExecutionID       ExecutionID `json:"execution_id"`
	Command           string      `json:"command"`
	Reason            Reason      `json:"reason"`
	LeaseEpoch        int64       `json:"lease_epoch"`
	CurrentEpoch      int64       `json:"current_epoch"`
	Outcome           Outcome     `json:"outcome,omitempty"`
	ProviderReference string      `json:"provider_reference,omitempty"`
	Detail            string      `json:"detail,omitempty"`
	RefusedAt         time.Time   `json:"refused_at"`
	// WorkerID is the worker id a renewal named, if any.
	WorkerID string `json:"worker_id,omitempty"`
	// SecretCheck says how the presented lease secret compared: held,
	// missing, wrong, or unbound (the execution has no digest to compare
	// with). Empty on refusals recorded before leases were bound.
	SecretCheck SecretCheck `json:"secret_check,omitempty"`
	// Field names the field at fault when Reason is command.invalid.
	Field string `json:"field,omitempty"`
	// RefusalDetail is the refusal's explanation, as the writer was told.
	RefusalDetail string `json:"refusal_detail,omitempty"`
	// Escaped names the fields kept escaped or cut (EvidenceText) because
	// they could not be stored as sent.
	Escaped []string `json:"escaped,omitempty"`
}

// RefusalsSummarized counts refusals past the evidence bound (invariant
// 14; EvidenceBound): once a key's refusals (Scope, ScopeID) in one window
// of the ledger's clock have been recorded one by one up to the bound, its
// further refusals in that window are counted into summaries like this
// one, each counting the refusals of one batch — by reason, with the first
// and last time, the principals (token names) that caused them, and a few
// samples, hostile text escaped and cut. Every refusal is recorded either
// one by one or in exactly one summary. It changes nothing; only evidence
// streams hold it.
type RefusalsSummarized struct {
	Scope   EvidenceScope `json:"scope"`
	ScopeID string        `json:"scope_id,omitempty"`
	// OperationID is the operation the refusals named ("" for the
	// unattributed stream's own scope).
	OperationID OperationID `json:"operation_id,omitempty"`
	// WindowStart and WindowEnd bound the window the refusals fell in;
	// BoundPerKey and BoundPerStream are the bound that was reached in it.
	WindowStart    time.Time `json:"window_start"`
	WindowEnd      time.Time `json:"window_end"`
	BoundPerKey    int       `json:"bound_per_key"`
	BoundPerStream int       `json:"bound_per_stream"`
	// Count is how many refusals this summary counts (at least one).
	Count   int64         `json:"count"`
	Reasons []ReasonCount `json:"reasons"`
	FirstAt time.Time     `json:"first_at"`
	LastAt  time.Time     `json:"last_at"`
	// Principals are who caused them (at most MaxSummaryPrincipals, in
	// the order first met); OtherPrincipals counts the refusals of the
	// principals past those.
	Principals      []PrincipalCount `json:"principals"`
	OtherPrincipals int64            `json:"other_principals,omitempty"`
	// Samples are the batch's first refusals (at most MaxSummarySamples).
	Samples      []RefusalSample `json:"samples"`
	SummarizedAt time.Time       `json:"summarized_at"`
}

// ReasonCount is how many refusals of one event type had one reason.
type ReasonCount struct {
	Type   string `json:"type"` // PresentationRejected, DeliveryDuplicated, WriteRefused
	Reason Reason `json:"reason"`
	Count  int64  `json:"count"`
}

// PrincipalCount is how many refusals one principal caused.
type PrincipalCount struct {
	Principal string `json:"principal"`
	Count     int64  `json:"count"`
}

// RefusalSample is one counted refusal, as its own event would have said
// it, shortened: free text escaped and cut (Escaped names those fields).
type RefusalSample struct {
	Type         string       `json:"type"`
	Reason       Reason       `json:"reason"`
	At           time.Time    `json:"at"`
	Principal    string       `json:"principal,omitempty"`
	WorkerID     string       `json:"worker_id,omitempty"`
	MessageID    MessageID    `json:"message_id,omitempty"`
	CapabilityID CapabilityID `json:"capability_id,omitempty"`
	ExecutionID  ExecutionID  `json:"execution_id,omitempty"`
	Command      string       `json:"command,omitempty"`
	Detail       string       `json:"detail,omitempty"`
	Escaped      []string     `json:"escaped,omitempty"`
}

func (OperationRequested) EventType() string   { return TypeOperationRequested }
func (Decided) EventType() string              { return TypeDecided }
func (CapabilityIssued) EventType() string     { return TypeCapabilityIssued }
func (CapabilityRevoked) EventType() string    { return TypeCapabilityRevoked }
func (Claimed) EventType() string              { return TypeClaimed }
func (DeliveryDuplicated) EventType() string   { return TypeDeliveryDuplicated }
func (PresentationRejected) EventType() string { return TypePresentationRejected }
func (LeaseRenewed) EventType() string         { return TypeLeaseRenewed }
func (OutcomeRecorded) EventType() string      { return TypeOutcomeRecorded }
func (OutcomeUnknown) EventType() string       { return TypeOutcomeUnknown }
func (LeaseLapsed) EventType() string          { return TypeLeaseLapsed }
func (LateOutcomeRecorded) EventType() string  { return TypeLateOutcomeRecorded }
func (Reconciled) EventType() string           { return TypeReconciled }
func (Escalated) EventType() string            { return TypeEscalated }
func (WriteRefused) EventType() string         { return TypeWriteRefused }
func (RefusalsSummarized) EventType() string   { return TypeRefusalsSummarized }
