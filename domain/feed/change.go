package feed

import (
	"time"

	"opledger/domain"
)

// State is where an operation moved, as the feed reports it.
type State string

// The states. Never rename one: consumers store them.
const (
	// StateRequested: the operation was requested (OperationRequested).
	StateRequested State = "requested"
	// StateAuthorized: a decision allowed an attempt (Decided, Allowed).
	StateAuthorized State = "authorized"
	// StateDenied: a decision denied it (Decided, Denied).
	StateDenied State = "denied"
	// StateRevoked: unused authority was withdrawn (CapabilityRevoked).
	StateRevoked State = "revoked"
	// StateExecuting: a worker claimed an execution (Claimed).
	StateExecuting State = "executing"
	// StateCompleted: the executor, or a stale executor's late evidence,
	// recorded that the effect happened (OutcomeRecorded or
	// LateOutcomeRecorded, Completed).
	StateCompleted State = "completed"
	// StateNotApplied: the executor recorded that it did not happen
	// (OutcomeRecorded or LateOutcomeRecorded, NotApplied).
	StateNotApplied State = "not_applied"
	// StateUnknown: it cannot be told whether the effect happened
	// (OutcomeUnknown, or LeaseLapsed); nothing executes until it is
	// reconciled.
	StateUnknown State = "unknown"
	// StateEscalated: an Unknown execution was handed to a person.
	StateEscalated State = "escalated"
	// StateReconciled: an Unknown or Escalated execution was resolved to a
	// definite Outcome (the provider asked, or a person with evidence).
	StateReconciled State = "reconciled"
)

// States lists every state, in the order an operation usually meets them.
var States = []State{StateRequested, StateAuthorized, StateDenied, StateRevoked, StateExecuting,
	StateCompleted, StateNotApplied, StateUnknown, StateEscalated, StateReconciled}

// mapping is what change says of an event type.
type mapping int

const (
	unhandled mapping = iota // no case: a bug the coverage test names
	ignored                  // an explicit case: the event changes no state
	mapped                   // the event changes the operation's state
)

// change is the one mapping from an event to a feed state: the state and
// the event's own fields an entry carries. Every registered event type has
// an explicit case (the codec's coverage test, through Maps); the events
// that change nothing a downstream service sees are ignored on purpose.
func change(e domain.Event) (Entry, mapping) {
	switch ev := e.(type) {
	case domain.OperationRequested:
		return Entry{State: StateRequested, At: ev.RequestedAt}, mapped
	case domain.Decided:
		state := StateAuthorized
		if ev.Verdict != domain.Allowed {
			state = StateDenied
		}
		return Entry{State: state, DecisionID: ev.DecisionID, Attempt: ev.Attempt, At: ev.DecidedAt}, mapped
	case domain.CapabilityIssued:
		// The authority of the decision reported as authorized: written with
		// it, or right after it; no change of its own.
		return Entry{}, ignored
	case domain.CapabilityRevoked:
		return Entry{State: StateRevoked, CapabilityID: ev.CapabilityID, Reason: ev.Reason, At: ev.RevokedAt}, mapped
	case domain.Claimed:
		return Entry{State: StateExecuting, CapabilityID: ev.CapabilityID, ExecutionID: ev.ExecutionID, Attempt: ev.Attempt,
			Use: ev.Use, IdempotencyKey: ev.IdempotencyKey, At: ev.ClaimedAt}, mapped
	case domain.DeliveryDuplicated, domain.PresentationRejected, domain.LeaseRenewed, domain.WriteRefused,
		domain.RefusalsSummarized:
		// Evidence and lease upkeep: the operation's state does not change.
		return Entry{}, ignored
	case domain.LogRegressed, domain.LogRegressionAcknowledged:
		// The regression stream's, never an operation's.
		return Entry{}, ignored
	case domain.LostEffectEscalated:
		return Entry{State: StateEscalated, ExecutionID: ev.ExecutionID, Attempt: ev.Attempt, IdempotencyKey: ev.IdempotencyKey,
			ProviderReference: ev.ProviderReference, Reason: string(domain.ReasonEffectLost), At: ev.FoundAt}, mapped
	case domain.OutcomeRecorded:
		return outcome(ev.Outcome, ev.ExecutionID, ev.ProviderReference, ev.RecordedAt), mapped
	case domain.LateOutcomeRecorded:
		return outcome(ev.Outcome, ev.ExecutionID, ev.ProviderReference, ev.RecordedAt), mapped
	case domain.OutcomeUnknown:
		return Entry{State: StateUnknown, ExecutionID: ev.ExecutionID, Reason: ev.Cause, At: ev.RecordedAt}, mapped
	case domain.LeaseLapsed:
		return Entry{State: StateUnknown, ExecutionID: ev.ExecutionID, Reason: "lease lapsed", At: ev.LapsedAt}, mapped
	case domain.Escalated:
		return Entry{State: StateEscalated, ExecutionID: ev.ExecutionID, Reason: ev.Reason, At: ev.EscalatedAt}, mapped
	case domain.Reconciled:
		return Entry{State: StateReconciled, ExecutionID: ev.ExecutionID, Outcome: ev.Outcome, ProviderReference: ev.ProviderReference,
			Method: ev.Method, At: ev.ReconciledAt}, mapped
	}
	return Entry{}, unhandled
}

// outcome is the entry of an executor's definite outcome.
func outcome(o domain.Outcome, x domain.ExecutionID, ref string, at time.Time) Entry {
	state := StateNotApplied
	if o == domain.Completed {
		state = StateCompleted
	}
	return Entry{State: state, ExecutionID: x, Outcome: o, ProviderReference: ref, At: at}
}

// Maps reports whether the feed has an explicit case for e's type (acting
// on it or ignoring it on purpose): the codec's coverage test asks it of
// every registered type.
func Maps(e domain.Event) bool {
	_, m := change(e)
	return m != unhandled
}
