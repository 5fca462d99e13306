package domain

import "time"

// Defaults the commands fall back to.
const (
	DefaultCapabilityTTL = 15 * time.Minute
	DefaultLeaseDuration = 60 * time.Second
	// MaxLeaseDuration bounds a lease: an abandoned execution must become
	// Unknown within a bounded time.
	MaxLeaseDuration = time.Hour
	// MaxCapabilityTTL bounds authority's lifetime.
	MaxCapabilityTTL = 7 * 24 * time.Hour
	// MaxTextLength bounds free text carried into events (details, reasons).
	MaxTextLength = 2000
	// MaxProviderReferenceLength bounds a provider's reference carried into
	// events.
	MaxProviderReferenceLength = 2 * MaxIDLength
)

// RequestOperation opens a new operation of a kind ("" is a refund).
type RequestOperation struct {
	OperationID OperationID
	Kind        OperationKind
	// A refund's: the order, the amount and currency, the order's total.
	OrderID         string
	AmountMinor     int64
	Currency        string
	OrderTotalMinor int64 // 0: not known yet; a decision must then supply it
	// An export download's: the generated export to deliver.
	ExportID      string
	CorrelationID CorrelationID
	RequestedBy   string
	RequestKey    string // the API caller's Idempotency-Key, if any
	RequestHash   string // a hash of the API request body, if any
}

// Decide evaluates the policy of the operation's kind for its next attempt.
type Decide struct {
	DecisionID DecisionID
	Approver   string
	// ApprovalLimitMinor and Facts are a refund's; ExportFacts an export
	// download's. The facts of another kind must be zero.
	ApprovalLimitMinor int64
	Facts              Facts
	ExportFacts        ExportFacts
	// Uses is how many uses the decision authorizes: 0 or 1 for a refund
	// (single use); 1 to the kind's MaxUses, required, for a kind of bounded
	// use.
	Uses      int
	KeyPolicy KeyPolicy // "" means KeyPerAttempt
}

// IssueCapability issues authority, of as many uses as the decision
// authorized, under the latest Allowed decision. DecisionID, when set, must
// name that decision.
type IssueCapability struct {
	CapabilityID CapabilityID
	DecisionID   DecisionID
	TTL          time.Duration // 0: DefaultCapabilityTTL
}

// RevokeCapability withdraws unused authority.
type RevokeCapability struct {
	CapabilityID CapabilityID
	Reason       string
	Actor        string
}

// Claim presents a capability on a message to open an execution.
type Claim struct {
	MessageID     MessageID
	CorrelationID CorrelationID
	CapabilityID  CapabilityID
	WorkerID      string
	// ExecutionID is the id the execution gets if the claim succeeds (minted
	// by the caller so that the decision stays pure).
	ExecutionID   ExecutionID
	LeaseDuration time.Duration // 0: DefaultLeaseDuration
	// BoundOperation and BoundAttempt are what a signed capability token says
	// the capability is bound to; zero when the presentation carried no token.
	BoundOperation OperationID
	BoundAttempt   int
	// LeaseSecretDigest is LeaseSecretDigest(secret) of the lease secret the
	// command handler minted for this claim (required). The model never
	// mints or sees the secret: it records the digest in Claimed.
	LeaseSecretDigest string
}

// RenewLease extends an executing execution's lease under its epoch, by the
// holder of its lease secret.
type RenewLease struct {
	ExecutionID   ExecutionID
	LeaseEpoch    int64
	LeaseSecret   string // the secret the claim returned; required
	WorkerID      string // when set, must be the lease owner
	LeaseDuration time.Duration
}

// RecordOutcome is the executor's result, conditional on its lease epoch and
// its lease secret.
type RecordOutcome struct {
	ExecutionID       ExecutionID
	LeaseEpoch        int64
	LeaseSecret       string // the secret the claim returned; required
	Outcome           Outcome
	ProviderReference string
	Detail            string
}

// LapseLease moves an execution whose lease expired to Unknown.
type LapseLease struct {
	ExecutionID ExecutionID
}

// RecordLateOutcome is an executor's definite result for its own execution
// after that execution became Unknown.
type RecordLateOutcome struct {
	ExecutionID       ExecutionID
	LeaseEpoch        int64  // the epoch the executor held
	LeaseSecret       string // the secret of that epoch's lease; required
	Outcome           Outcome
	ProviderReference string
	Detail            string
}

// RefuseWrite records an executor's write that an edge refused before it
// could become one of the commands above (a body it could not read, a field
// out of range): it is evidence like any refused executor write. Refusal is
// what the edge answers; its Reason and Field are recorded.
type RefuseWrite struct {
	ExecutionID       ExecutionID
	Command           string // CommandRenewLease, CommandRecordOutcome or CommandRecordLateOutcome
	LeaseEpoch        int64
	LeaseSecret       string
	WorkerID          string
	Outcome           Outcome
	ProviderReference string
	Detail            string
	Refusal           *Refusal // required
}

// The executor commands, as WriteRefused.Command names them.
const (
	CommandRenewLease        = "RenewLease"
	CommandRecordOutcome     = "RecordOutcome"
	CommandRecordLateOutcome = "RecordLateOutcome"
)

// Reconcile resolves an Unknown or Escalated execution.
type Reconcile struct {
	ExecutionID       ExecutionID
	Outcome           Outcome
	Method            ReconcileMethod
	ProviderReference string
	Actor             string
	Evidence          string
}

// Escalate hands an Unknown execution to a person.
type Escalate struct {
	ExecutionID ExecutionID
	Reason      string
	Detail      string
}
