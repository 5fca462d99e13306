package domain

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ExecutionState is where one execution stands.
type ExecutionState string

const (
	ExecExecuting  ExecutionState = "Executing"
	ExecCompleted  ExecutionState = "Completed"
	ExecNotApplied ExecutionState = "NotApplied"
	ExecUnknown    ExecutionState = "Unknown"
	// ExecEscalated is a workflow status for a person; for safety it is Unknown.
	ExecEscalated ExecutionState = "Escalated"
)

// Blocks reports whether an execution in this state forbids a new one of a
// single-use kind (invariant 3: only NotApplied lets another execution
// open). EffectPolicy.Blocks says it for every kind.
func (s ExecutionState) Blocks() bool { return s != ExecNotApplied }

// Open reports whether an execution in this state has not ended: Executing,
// Unknown, or Escalated (Unknown for safety).
func (s ExecutionState) Open() bool {
	return s == ExecExecuting || s == ExecUnknown || s == ExecEscalated
}

// CapabilityState is where one capability stands. Expired is not stored: it is
// judged against the clock at presentation.
type CapabilityState string

const (
	CapIssued   CapabilityState = "Issued"
	CapConsumed CapabilityState = "Consumed"
	CapRevoked  CapabilityState = "Revoked"
)

// OperationStatus summarises an operation for people and projections.
type OperationStatus string

const (
	OpRequested  OperationStatus = "Requested"  // no decision yet
	OpDenied     OperationStatus = "Denied"     // latest decision denied
	OpAuthorized OperationStatus = "Authorized" // allowed, no execution for this attempt yet
	OpExecuting  OperationStatus = "Executing"
	OpUnknown    OperationStatus = "Unknown"
	OpEscalated  OperationStatus = "Escalated"
	OpCompleted  OperationStatus = "Completed"
	OpNotApplied OperationStatus = "NotApplied" // last attempt had no effect; a new decision may follow
)

// For a kind of bounded use, Status is the open execution's state while one
// is open; Authorized while the latest decision's capability has uses left
// (or is not issued yet); once they are spent, the last use's outcome
// (Completed or NotApplied).

// Capability is one capability as the stream knows it. It is Issued while
// it has uses left, Consumed once every use was claimed; ConsumedBy,
// ConsumedAt and Execution are its latest claim's.
type Capability struct {
	ID         CapabilityID
	DecisionID DecisionID
	Attempt    int
	IssuedAt   time.Time
	ExpiresAt  time.Time
	State      CapabilityState
	// Uses is how many claims the capability allows; Claims how many it had.
	Uses       int
	Claims     int
	ConsumedBy MessageID
	ConsumedAt time.Time
	Execution  ExecutionID
}

// UsesLeft is how many claims the capability still allows: 0 once it is
// consumed or revoked (expiry is judged against the clock at presentation).
func (c *Capability) UsesLeft() int {
	if c.State != CapIssued {
		return 0
	}
	return max(c.Uses-c.Claims, 0)
}

// Execution is one claimed attempt.
type Execution struct {
	ID           ExecutionID
	CapabilityID CapabilityID
	MessageID    MessageID
	Attempt      int
	// Use is which use of its capability the execution is, from 1.
	Use               int
	State             ExecutionState
	LeaseEpoch        int64
	LeaseOwner        string
	LeaseExpiresAt    time.Time
	IdempotencyKey    IdempotencyKey
	ProviderReference string
	StartedAt         time.Time
	EndedAt           time.Time
	// HeldLeases are the leases the execution was held under, each with the
	// digest of its holder's secret (today only the claim's epoch 1: a lapse
	// raises the epoch and hands the new one to nobody). Empty for an
	// execution claimed before leases were bound to their holder.
	HeldLeases []HeldLease
}

// Decision is one recorded policy evaluation.
type Decision struct {
	ID             DecisionID
	Verdict        Verdict
	Attempt        int
	Uses           int
	IdempotencyKey IdempotencyKey
	KeyPolicy      KeyPolicy
	Facts          Facts
	ExportFacts    ExportFacts
}

// Operation is the state an operation's stream folds into. The zero value is
// an operation that does not exist yet. Build it only with Evolve; copy it
// only with Fork or Clone. A record it holds (a Capability, an Execution)
// is never changed once held: Evolve replaces it with a changed copy.
type Operation struct {
	ID OperationID
	// Kind is the operation's kind; Policy its effect policy.
	Kind            OperationKind
	Policy          EffectPolicy
	ExportID        string
	OrderID         string
	AmountMinor     int64
	Currency        string
	OrderTotalMinor int64
	CorrelationID   CorrelationID
	RequestKey      string
	RequestHash     string
	CreatedAt       time.Time
	UpdatedAt       time.Time

	Decisions    []Decision
	Capabilities map[CapabilityID]*Capability
	Executions   []*Execution
	// Messages holds every message id presented to this operation.
	Messages map[MessageID]struct{}

	// Version is the stream version this state was folded from
	// (NoStreamVersion, -1, for an operation that does not exist).
	Version int64

	// shares marks what the state may share with another (see Fork).
	shares sharedParts
}

// NewOperation returns the state of an operation with no events.
func NewOperation() *Operation {
	return &Operation{
		Capabilities: map[CapabilityID]*Capability{},
		Messages:     map[MessageID]struct{}{},
		Version:      -1,
	}
}

// Exists reports whether the operation was requested.
func (o *Operation) Exists() bool { return o.ID != "" }

// LatestDecision returns the most recent decision, if any.
func (o *Operation) LatestDecision() (Decision, bool) {
	if len(o.Decisions) == 0 {
		return Decision{}, false
	}
	return o.Decisions[len(o.Decisions)-1], true
}

// Execution returns the execution with id, or nil.
func (o *Operation) Execution(id ExecutionID) *Execution {
	for _, e := range o.Executions {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// CurrentExecution returns the most recent execution, or nil.
func (o *Operation) CurrentExecution() *Execution {
	if len(o.Executions) == 0 {
		return nil
	}
	return o.Executions[len(o.Executions)-1]
}

// Blocking returns the first execution that forbids a new one under the
// operation's effect policy, or nil.
func (o *Operation) Blocking() *Execution {
	for _, e := range o.Executions {
		if o.Policy.Blocks(e.State) {
			return e
		}
	}
	return nil
}

// LatestCapability returns the capability issued under the latest
// decision, or nil. A kind of bounded use has at most one per decision.
func (o *Operation) LatestCapability() *Capability {
	d, ok := o.LatestDecision()
	if !ok {
		return nil
	}
	var latest *Capability
	for _, c := range o.Capabilities {
		if c.DecisionID == d.ID && (latest == nil || c.IssuedAt.After(latest.IssuedAt) || c.IssuedAt.Equal(latest.IssuedAt) && c.ID > latest.ID) {
			latest = c
		}
	}
	return latest
}

// Status summarises the operation.
func (o *Operation) Status() OperationStatus {
	if o.Policy.Repeats {
		return o.boundedStatus()
	}
	for _, e := range o.Executions {
		if e.State == ExecCompleted {
			return OpCompleted
		}
	}
	if b := o.Blocking(); b != nil {
		return OperationStatus(b.State)
	}
	d, ok := o.LatestDecision()
	if !ok {
		return OpRequested
	}
	if d.Verdict == Denied {
		return OpDenied
	}
	if cur := o.CurrentExecution(); cur != nil && cur.Attempt >= d.Attempt {
		return OpNotApplied
	}
	return OpAuthorized
}

// boundedStatus is Status for a kind of bounded use.
func (o *Operation) boundedStatus() OperationStatus {
	if b := o.Blocking(); b != nil {
		return OperationStatus(b.State)
	}
	d, ok := o.LatestDecision()
	switch {
	case !ok:
		return OpRequested
	case d.Verdict == Denied:
		return OpDenied
	}
	if c := o.LatestCapability(); c == nil || c.UsesLeft() > 0 {
		return OpAuthorized
	}
	if cur := o.CurrentExecution(); cur != nil && cur.Attempt >= d.Attempt {
		return OperationStatus(cur.State) // Completed or NotApplied: the last use's
	}
	return OpAuthorized
}

// NextAttempt is the attempt number a new decision would be for: 1 before any
// execution, n+1 once attempt n's execution ended NotApplied.
func (o *Operation) NextAttempt() int {
	if cur := o.CurrentExecution(); cur != nil {
		return cur.Attempt + 1
	}
	return 1
}

// Evolve applies one event to the state. An event that cannot follow the
// state (a claim of an unknown capability, an outcome for an unknown
// execution) means the stream is corrupt or was written by a bug: Evolve
// returns an error rather than papering over it.
func (o *Operation) Evolve(e Event) error {
	switch ev := e.(type) {
	case OperationRequested:
		return o.evolveRequested(ev)
	}
	if !o.Exists() {
		return fmt.Errorf("evolve: %s before OperationRequested", e.EventType())
	}
	if k := kindOf(e); k != "" && k != o.Kind {
		return fmt.Errorf("evolve: a %s event of kind %s on a %s operation", e.EventType(), k, o.Kind)
	}
	switch ev := e.(type) {
	case Decided:
		d := Decision{
			ID: ev.DecisionID, Verdict: ev.Verdict, Attempt: ev.Attempt, Uses: o.Policy.stated(ev.Uses),
			IdempotencyKey: ev.IdempotencyKey, KeyPolicy: ev.KeyPolicy, Facts: ev.Facts,
		}
		if ev.ExportFacts != nil {
			d.ExportFacts = *ev.ExportFacts
		}
		o.addDecision(d)
		o.UpdatedAt = ev.DecidedAt
	case CapabilityIssued:
		return o.evolveIssued(ev)
	case CapabilityRevoked:
		c, ok := o.Capabilities[ev.CapabilityID]
		if !ok {
			return fmt.Errorf("evolve: revoke of unknown capability %s", ev.CapabilityID)
		}
		revoked := *c
		revoked.State = CapRevoked
		o.putCapability(&revoked)
		o.UpdatedAt = ev.RevokedAt
	case Claimed:
		return o.evolveClaimed(ev)
	case DeliveryDuplicated:
		// Transport evidence only: never changes an execution.
	case PresentationRejected:
		o.addMessage(ev.MessageID)
	case LeaseRenewed:
		return o.onExecution(ev.ExecutionID, e, time.Time{}, func(x *Execution) { x.LeaseExpiresAt = ev.LeaseExpiresAt })
	case OutcomeRecorded:
		return o.onExecution(ev.ExecutionID, e, ev.RecordedAt, func(x *Execution) { x.end(ev.Outcome, ev.ProviderReference, ev.RecordedAt) })
	case OutcomeUnknown:
		return o.onExecution(ev.ExecutionID, e, ev.RecordedAt, func(x *Execution) { x.State = ExecUnknown })
	case LeaseLapsed:
		return o.onExecution(ev.ExecutionID, e, ev.LapsedAt, func(x *Execution) { x.State, x.LeaseEpoch = ExecUnknown, ev.ToEpoch })
	case LateOutcomeRecorded:
		return o.onExecution(ev.ExecutionID, e, ev.RecordedAt, func(x *Execution) { x.end(ev.Outcome, ev.ProviderReference, ev.RecordedAt) })
	case Reconciled:
		return o.onExecution(ev.ExecutionID, e, ev.ReconciledAt, func(x *Execution) { x.end(ev.Outcome, ev.ProviderReference, ev.ReconciledAt) })
	case Escalated:
		return o.onExecution(ev.ExecutionID, e, ev.EscalatedAt, func(x *Execution) { x.State = ExecEscalated })
	case WriteRefused:
		// Evidence only.
	case RefusalsSummarized:
		// Evidence only; evidence streams hold it, never an operation's.
	case LostEffectEscalated:
		return o.openLostEffect(ev)
	case LogRegressed, LogRegressionAcknowledged:
		return fmt.Errorf("evolve: %s belongs in %s, never in an operation's stream", e.EventType(), RegressionStream)
	default:
		return fmt.Errorf("evolve: %w %T", ErrUnhandledEvent, e)
	}
	return nil
}

// evolveRequested opens the operation (Evolve's first event).
func (o *Operation) evolveRequested(ev OperationRequested) error {
	if o.Exists() {
		return fmt.Errorf("evolve: operation %s requested twice", ev.OperationID)
	}
	p, ok := PolicyOf(ev.Kind)
	if !ok {
		return fmt.Errorf("evolve: operation %s is of kind %q, which this build does not know", ev.OperationID, ev.Kind)
	}
	o.Kind, o.Policy, o.ExportID = p.Kind, p, ev.ExportID
	o.ID, o.OrderID, o.AmountMinor, o.Currency = ev.OperationID, ev.OrderID, ev.AmountMinor, ev.Currency
	o.OrderTotalMinor, o.CorrelationID, o.CreatedAt = ev.OrderTotalMinor, ev.CorrelationID, ev.RequestedAt
	o.RequestKey, o.RequestHash = ev.RequestKey, ev.RequestHash
	o.UpdatedAt = ev.RequestedAt
	return nil
}

// evolveIssued adds a capability of the uses its kind allows.
func (o *Operation) evolveIssued(ev CapabilityIssued) error {
	if _, dup := o.Capabilities[ev.CapabilityID]; dup {
		return fmt.Errorf("evolve: capability %s issued twice", ev.CapabilityID)
	}
	uses := o.Policy.stated(ev.Uses)
	if uses < 1 || uses > o.Policy.MaxUses {
		return fmt.Errorf("evolve: capability %s of %d uses; a %s capability has 1 to %d", ev.CapabilityID, ev.Uses, o.Kind, o.Policy.MaxUses)
	}
	o.putCapability(&Capability{
		ID: ev.CapabilityID, DecisionID: ev.DecisionID, Attempt: ev.Attempt, Uses: uses,
		IssuedAt: ev.IssuedAt, ExpiresAt: ev.ExpiresAt, State: CapIssued,
	})
	o.UpdatedAt = ev.IssuedAt
	return nil
}

// evolveClaimed consumes the claim's use of its capability, the next one, and
// opens its execution.
func (o *Operation) evolveClaimed(ev Claimed) error {
	c, ok := o.Capabilities[ev.CapabilityID]
	if !ok {
		return fmt.Errorf("evolve: claim of unknown capability %s", ev.CapabilityID)
	}
	if c.State == CapConsumed {
		return fmt.Errorf("evolve: capability %s consumed beyond its %d uses", ev.CapabilityID, c.Uses)
	}
	use := o.Policy.stated(ev.Use)
	if use != c.Claims+1 {
		return fmt.Errorf("evolve: claim of use %d of capability %s, whose next use is %d", ev.Use, ev.CapabilityID, c.Claims+1)
	}
	claimed := *c
	claimed.Claims++
	claimed.ConsumedBy, claimed.ConsumedAt, claimed.Execution = ev.MessageID, ev.ClaimedAt, ev.ExecutionID
	if claimed.Claims >= claimed.Uses {
		claimed.State = CapConsumed
	}
	o.putCapability(&claimed)
	x := &Execution{
		ID: ev.ExecutionID, CapabilityID: ev.CapabilityID, MessageID: ev.MessageID, Attempt: ev.Attempt, Use: use,
		State: ExecExecuting, LeaseEpoch: ev.LeaseEpoch, LeaseOwner: ev.WorkerID,
		LeaseExpiresAt: ev.LeaseExpiresAt, IdempotencyKey: ev.IdempotencyKey, StartedAt: ev.ClaimedAt,
	}
	if ev.LeaseSecretDigest != "" {
		x.HeldLeases = []HeldLease{{Epoch: ev.LeaseEpoch, SecretDigest: ev.LeaseSecretDigest}}
	}
	o.addExecution(x)
	o.addMessage(ev.MessageID)
	o.UpdatedAt = ev.ClaimedAt
	return nil
}

// kindOf returns the kind an event states, if it states one.
func kindOf(e Event) OperationKind {
	switch ev := e.(type) {
	case Decided:
		return ev.Kind
	case CapabilityIssued:
		return ev.Kind
	case Claimed:
		return ev.Kind
	}
	return ""
}

// ErrUnhandledEvent is wrapped by Evolve for an event type it has no case
// for. Every registered type has one (the codec's coverage test holds
// every consumer to that): a type that only carries evidence has an
// explicit case that changes nothing.
var ErrUnhandledEvent = errors.New("unhandled event type")

// onExecution replaces the execution e is about with a copy change was
// applied to, and stamps the operation's UpdatedAt with at (unless zero).
// An event about an execution the stream never opened is an error.
func (o *Operation) onExecution(id ExecutionID, e Event, at time.Time, change func(*Execution)) error {
	i := slices.IndexFunc(o.Executions, func(x *Execution) bool { return x.ID == id })
	if i < 0 {
		return fmt.Errorf("evolve: %s for unknown execution %s", e.EventType(), id)
	}
	x := *o.Executions[i]
	change(&x)
	o.putExecution(i, &x)
	if !at.IsZero() {
		o.UpdatedAt = at
	}
	return nil
}

// end gives the execution its definite outcome.
func (x *Execution) end(outcome Outcome, ref string, at time.Time) {
	x.State, x.ProviderReference, x.EndedAt = ExecutionState(outcome), ref, at
}
