package audit

import (
	"strconv"
	"time"

	"opledger/domain"
)

// Violation is one finding: an event that breaks an invariant.
type Violation struct {
	Invariant string             `json:"invariant"` // "I1".."I9", "S1".."S4", "H1".."H3", "D1", "D2"
	Name      string             `json:"name"`
	Operation domain.OperationID `json:"operation_id,omitempty"`
	Stream    string             `json:"stream"`
	Position  string             `json:"position"` // global position of the offending event
	Version   int64              `json:"version"`  // its stream version
	Event     string             `json:"event"`    // its type
	// Related are stream versions of the earlier events the finding refers
	// to (the first consumption, the blocking execution, ...).
	Related []int64 `json:"related_versions,omitempty"`
	Message string  `json:"message"`
}

// OpenUnknown is an execution that is Unknown or Escalated at the end of the
// verified range: information for whoever reconciles, not a violation.
type OpenUnknown struct {
	Operation domain.OperationID    `json:"operation_id"`
	Execution domain.ExecutionID    `json:"execution_id"`
	State     domain.ExecutionState `json:"state"`
	Since     time.Time             `json:"since"`
	Via       string                `json:"via"`      // the event that made it Unknown
	Position  string                `json:"position"` // that event's global position
	Version   int64                 `json:"version"`  // and stream version
}

// ExecutionCounts counts executions by state at the end of the range.
type ExecutionCounts struct {
	Executing  int64 `json:"executing"`
	Completed  int64 `json:"completed"`
	NotApplied int64 `json:"not_applied"`
	Unknown    int64 `json:"unknown"`
	Escalated  int64 `json:"escalated"`
}

func (c *ExecutionCounts) add(s execState, n int64) {
	switch s {
	case exExecuting:
		c.Executing += n
	case exCompleted:
		c.Completed += n
	case exNotApplied:
		c.NotApplied += n
	case exUnknown:
		c.Unknown += n
	case exEscalated:
		c.Escalated += n
	}
}

// Report is what Verify found.
type Report struct {
	// From and To are the range verified ("" : the start / the end of the
	// log); Last is the position of the last event checked.
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Last string `json:"last,omitempty"`
	// Complete is true only when the whole range was read and checked. A
	// Report returned with an error is partial.
	Complete bool `json:"complete"`

	Events          int64 `json:"events"`           // events checked in the range
	OperationEvents int64 `json:"operation_events"` // of which in operation streams
	EvidenceEvents  int64 `json:"evidence_events"`  // in the unattributed evidence streams
	// OperationEvidenceEvents are the events of operations' evidence
	// streams ("evidence-OP-…").
	OperationEvidenceEvents int64 `json:"operation_evidence_events"`
	OtherEvents             int64 `json:"other_events"` // in streams that are neither (counted only)
	Operations              int64 `json:"operations"`   // operation streams seen in the range
	// PrimedEvents counts events read from streams' history before From, to
	// know their state (not checked, not counted in Events).
	PrimedEvents int64 `json:"primed_events,omitempty"`
	// OpenOperationsPeak is the most operations that had an open execution
	// at once: what MaxOpenOperations bounds.
	OpenOperationsPeak int `json:"open_operations_peak"`

	Executions ExecutionCounts `json:"executions"`

	// Refusals accounts for every refusal the range recorded, one by one or
	// counted in a summary.
	Refusals RefusalCounts `json:"refusals"`

	// OpenUnknowns lists Unknown and Escalated executions, oldest first, up
	// to VerifyOptions.MaxListedUnknowns; OpenUnknownCount counts them all.
	OpenUnknowns     []OpenUnknown `json:"open_unknowns"`
	OpenUnknownCount int64         `json:"open_unknown_count"`

	// IgnoredMembers counts events holding a member this build does not
	// know and read past (a newer build's additive field, or tampering:
	// docs/design.md, "Event compatibility"); FirstIgnored names the first
	// ("operation-OP-1@4 data.uses_left"). Information, not a violation.
	IgnoredMembers int64  `json:"ignored_members,omitempty"`
	FirstIgnored   string `json:"first_ignored,omitempty"`

	// Violations lists findings in log order, up to
	// VerifyOptions.MaxViolations; ViolationCount counts them all and
	// ByInvariant by invariant id.
	Violations     []Violation      `json:"violations"`
	ViolationCount int64            `json:"violation_count"`
	ByInvariant    map[string]int64 `json:"by_invariant"`

	// Chain is what the hash-chain checks saw; Digests what the log's
	// comparison with each digest given found (in the order digest,
	// previous).
	Chain   ChainSummary  `json:"chain"`
	Digests []DigestCheck `json:"digests,omitempty"`
}

// RefusalCounts counts refusals (refused presentations, duplicate
// deliveries, refused writes): Total, by reason, of which Summarized were
// counted in Summaries summary events rather than recorded one by one.
type RefusalCounts struct {
	Total      int64            `json:"total"`
	Summarized int64            `json:"summarized"`
	Summaries  int64            `json:"summaries"`
	ByReason   map[string]int64 `json:"by_reason,omitempty"`
}

// OK reports whether the range was verified completely and broke no
// invariant. Open Unknowns do not make a report fail. A CLI exits 0 only
// when OK.
func (r Report) OK() bool { return r.Complete && r.ViolationCount == 0 }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
