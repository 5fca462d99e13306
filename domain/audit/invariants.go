package audit

// Invariant names one check Verify makes. ID is stable ("I1".."I10" and I14
// for the invariants, "S1".."S4" for the structural checks, "H1".."H3" and "D1",
// "D2" for tamper evidence: see check_chain.go); Name is a stable slug.
type Invariant struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (i Invariant) String() string { return i.ID + " " + i.Name }

// The invariants, numbered as the audit brief numbers them (docs/design.md's list
// differs in places: its invariant 8, store unavailability, leaves no trace
// in the log to check).
var (
	// I1: a capability is consumed at most once, and never claimed when it
	// is revoked, expired at claim time, or not issued on the operation.
	I1CapabilityConsumedOnce = Invariant{"I1", "capability-consumed-at-most-once"}
	// I2: spent authority is never reset: no capability issued again, a
	// claim only for its capability's attempt and only for an attempt that
	// has not executed, a decision only for attempt n+1.
	I2AuthorityNeverReset = Invariant{"I2", "spent-authority-never-reset"}
	// I3: no execution opens while another of the operation is Executing,
	// Unknown, Escalated or Completed.
	I3OneConsequentialExecution = Invariant{"I3", "one-consequential-execution"}
	// I4: Unknown is reached only from the executor's own OutcomeUnknown or
	// a LeaseLapsed after the lease expired, and a duplicate delivery never
	// changes an execution.
	I4UnknownNeverInferred = Invariant{"I4", "unknown-never-inferred"}
	// I5: executor writes are accepted only under the execution's current
	// epoch while it is Executing; a late outcome only resolves Unknown or
	// Escalated, under an epoch the execution held. Once the log holds a
	// claim bound to its holder (a lease secret digest), every later claim
	// carries one, and no executor write is accepted for an execution
	// claimed without one. (The secret a write presented is never recorded,
	// so the audit cannot recheck it; it checks what the log can show.)
	I5EpochFencing = Invariant{"I5", "writes-fenced-by-epoch"}
	// I6: the provider key is derived from operation and attempt per the
	// decision's key policy, on the decision and on every claim.
	I6ProviderKeyDerived = Invariant{"I6", "provider-key-derived"}
	// I7: every refused presentation is recorded with capability, message,
	// reason and execution_attempted=false; spent authority on a new message
	// is marked replay_suspected; a duplicate is a message seen before.
	I7RefusalRecorded = Invariant{"I7", "refusal-recorded"}
	// I8: an Unknown stays open, is reconciled (Reconciled or
	// LateOutcomeRecorded) or escalated; an Escalated is closed only by
	// evidence; only Unknown or Escalated executions are reconciled.
	I8UnknownResolved = Invariant{"I8", "unknown-resolved-or-escalated"}
	// I9: authority follows a current Allowed decision: a new attempt is
	// decided (facts recorded) before its capability is issued, nothing is
	// decided while an execution blocks, and a claim's decision is the
	// latest and allows what its recorded facts allow.
	I9NewAttemptDecided = Invariant{"I9", "new-attempt-decided-again"}

	// I10: authority of bounded use: a capability of N uses is claimed at
	// most N times, use 1, 2, ... in order, each claim of its own, with N
	// within what its kind allows and what its decision authorized, one
	// capability per decision; at most one execution of the operation is
	// open (Executing, Unknown or Escalated) at a time; every use has its
	// own provider key, derived from operation, attempt and use, never one
	// an earlier execution of the operation had; and an event states the
	// operation's own kind. Refunds are N = 1 under I1 and I3.
	I10BoundedUse = Invariant{"I10", "bounded-use"}

	// I14: evidence is bounded and counted (docs/design.md's invariant 14):
	// an evidence stream holds evidence only; a refusal is recorded one by
	// one only while its key and its stream are within the bound of its
	// window (domain.EvidenceBound), and a summary counts refusals only past
	// it, its reasons and principals adding up to its count, its samples
	// and principals within their bounds, its times within its window (or
	// in a window the stream does not keep: a late refusal, which the
	// ledger counts in a kept one).
	I14EvidenceBounded = Invariant{"I14", "evidence-bounded-and-counted"}

	// S1: each stream's versions are 0, 1, 2, ... with no gap or repeat.
	S1VersionsContiguous = Invariant{"S1", "stream-versions-contiguous"}
	// S2: every event decodes (known type and schema, no unknown field,
	// readable metadata, known enum values).
	S2Decodable = Invariant{"S2", "events-decodable"}
	// S3: an operation stream starts with its one OperationRequested, for
	// the operation the stream is named after.
	S3RequestedFirst = Invariant{"S3", "operation-requested-first"}
	// S4: an event names only capabilities and executions its operation has.
	S4ReferencesResolve = Invariant{"S4", "references-resolve"}
)

// Invariants lists every check, in report order.
var Invariants = []Invariant{
	I1CapabilityConsumedOnce, I2AuthorityNeverReset, I3OneConsequentialExecution,
	I4UnknownNeverInferred, I5EpochFencing, I6ProviderKeyDerived, I7RefusalRecorded,
	I8UnknownResolved, I9NewAttemptDecided, I10BoundedUse, I14EvidenceBounded,
	S1VersionsContiguous, S2Decodable, S3RequestedFirst, S4ReferencesResolve,
	H1ChainIntact, H2EventsHashed, H3HeadsMatch, D1MatchesDigest, D2DigestsConsistent,
}
