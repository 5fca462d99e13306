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
)

// RequestOperation opens a new operation.
type RequestOperation struct {
	OperationID     OperationID
	OrderID         string
	AmountMinor     int64
	Currency        string
	OrderTotalMinor int64 // 0: not known yet; a decision must then supply it
	CorrelationID   CorrelationID
	RequestedBy     string
	RequestKey      string // the API caller's Idempotency-Key, if any
	RequestHash     string // a hash of the API request body, if any
}

// Decide evaluates the refund policy for the operation's next attempt.
type Decide struct {
	DecisionID         DecisionID
	Approver           string
	ApprovalLimitMinor int64
	Facts              Facts
	KeyPolicy          KeyPolicy // "" means KeyPerAttempt
}

// IssueCapability issues single-use authority under the latest Allowed
// decision. DecisionID, when set, must name that decision.
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
}

// RenewLease extends an executing execution's lease under its epoch.
type RenewLease struct {
	ExecutionID   ExecutionID
	LeaseEpoch    int64
	WorkerID      string // when set, must be the lease owner
	LeaseDuration time.Duration
}

// RecordOutcome is the executor's result, conditional on its lease epoch.
type RecordOutcome struct {
	ExecutionID       ExecutionID
	LeaseEpoch        int64
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
	LeaseEpoch        int64 // the epoch the executor held
	Outcome           Outcome
	ProviderReference string
	Detail            string
}

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
