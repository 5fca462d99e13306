package audit

import (
	"time"

	"opledger/domain"
)

// execState is an execution's state in one byte.
type execState uint8

const (
	exExecuting execState = iota + 1
	exCompleted
	exNotApplied
	exUnknown
	exEscalated
)

var execStateNames = [...]domain.ExecutionState{
	exExecuting: domain.ExecExecuting, exCompleted: domain.ExecCompleted, exNotApplied: domain.ExecNotApplied,
	exUnknown: domain.ExecUnknown, exEscalated: domain.ExecEscalated,
}

func (s execState) String() string { return string(execStateNames[s]) }

// open: the execution is not finished (its strings are kept).
func (s execState) open() bool { return s == exExecuting || s == exUnknown || s == exEscalated }

// blocks: no other execution of a single-use operation may open
// (invariant 3). operationState.blocks says it for every kind.
func (s execState) blocks() bool { return s != exNotApplied }

// unknownish: Unknown for safety (Escalated included).
func (s execState) unknownish() bool { return s == exUnknown || s == exEscalated }

// stateOfOutcome maps a definite outcome to its state; ok is false for
// anything else.
func stateOfOutcome(o domain.Outcome) (execState, bool) {
	switch o {
	case domain.Completed:
		return exCompleted, true
	case domain.NotApplied:
		return exNotApplied, true
	}
	return 0, false
}

// capState is a capability's state in one byte.
type capState uint8

const (
	capIssued capState = iota + 1
	capConsumed
	capRevoked
)

// keyPolicy is a decision's key policy in one byte (0: not known).
type keyPolicy uint8

const (
	policyUnknown keyPolicy = iota
	policyPerAttempt
	policyReuseFirst
)

func policyOf(p domain.KeyPolicy) keyPolicy {
	switch p {
	case domain.KeyPerAttempt:
		return policyPerAttempt
	case domain.KeyReuseFirst:
		return policyReuseFirst
	}
	return policyUnknown
}

// keyFor derives the provider key of attempt under policy, as Decide does,
// for an operation of effect policy ep.
func keyFor(ep *domain.EffectPolicy, op domain.OperationID, p keyPolicy, attempt int) domain.IdempotencyKey {
	if p == policyReuseFirst {
		return ep.AttemptKey(op, 1)
	}
	return ep.AttemptKey(op, attempt)
}

// effectPolicies are the kinds' policies, one copy each, so an operation
// keeps a pointer (8 bytes) rather than the policy.
var effectPolicies = func() map[domain.OperationKind]*domain.EffectPolicy {
	out := map[domain.OperationKind]*domain.EffectPolicy{}
	for _, k := range domain.Kinds() {
		p, _ := domain.PolicyOf(k)
		out[k] = &p
	}
	return out
}()

// refundPolicy is the policy of an operation whose kind is not known (its
// OperationRequested is missing: S3 says so).
var refundPolicy = effectPolicies[domain.KindRefund]

// decisionRec is the latest decision of an operation.
type decisionRec struct {
	id      idHash
	attempt int
	uses    int32
	allowed bool
	policy  keyPolicy
	version int64
}

// capRec is one capability: 48 bytes.
type capRec struct {
	decision idHash
	// at is, in unix nanoseconds, when it expires, and once consumed (its
	// expiry no longer asked) the time of the claim that spent its last
	// use: one field for both keeps a capability's idMap entry at 48
	// bytes (audit verify's memory bound).
	at      int64
	version int64 // where it was issued, then where it was consumed or revoked
	attempt int32
	uses    int32 // the uses it was issued with
	claims  int32 // the claims it had
	state   capState
	policy  keyPolicy // its decision's, when that was the latest at issue
}

// execRec is one execution. The strings and the Unknown record exist only
// while the execution is open; they are dropped when it ends.
type execRec struct {
	epoch        int64
	leaseExpires int64 // unix nanoseconds
	version      int64 // where its state last changed
	owner        idHash
	attempt      int32
	state        execState
	id           domain.ExecutionID // "" once the execution ended
	unknown      *unknownSince      // set while Unknown or Escalated
	// unbound: claimed without a lease secret digest (before leases were
	// bound to their holder).
	unbound bool
}

// unknownSince records how and where an execution became Unknown.
type unknownSince struct {
	seq      int64 // order in this run, for listing oldest first
	position string
	version  int64
	at       time.Time
	via      string
}

// operationState is everything Verify keeps about one operation stream:
// about 240 bytes, plus an idMap entry per capability (48 bytes), execution
// (56) and presented message (8), and, for a kind of bounded use, the hash
// of each execution's provider key (8).
type operationState struct {
	// effect is the operation's effect policy (refundPolicy until its
	// OperationRequested says otherwise).
	effect       *domain.EffectPolicy
	keys         idSet // provider keys of its executions (bounded use only)
	lastCap      idHash
	version      int64 // last stream version seen (-1: none)
	amount       int64
	orderTotal   int64
	latest       decisionRec
	caps         idMap[capRec]
	execs        idMap[execRec]
	presented    idSet        // message ids presented (claimed or refused)
	duplicated   idMap[int64] // message ids recorded as duplicate deliveries, with the first one's time (unix nanoseconds)
	lastAttempt  int          // highest attempt that has an execution
	openExecs    int32        // Executing, Unknown or Escalated
	blockingExec int32        // open or Completed (single use), open (bounded use)
	requested    bool
	unrequested  bool // an event before OperationRequested was reported
	decided      bool
	// evidence is the operation's evidence stream, once met.
	evidence *evidenceStream
	// chains are the chain check's states of the operation's stream and of
	// its evidence stream (chainChecker.streams holds them too), once met:
	// an event's chain state found without a second lookup by stream name.
	chains [2]*chainState
}

func newOperationState() *operationState { return &operationState{version: -1, effect: refundPolicy} }

// blocks: an execution in state s keeps a new one of this operation from
// opening: every state but NotApplied for a single-use kind (invariant 3),
// the open ones for a kind of bounded use (one open at a time).
func (st *operationState) blocks(s execState) bool {
	if st.effect.Repeats {
		return s.open()
	}
	return s.blocks()
}

// firstBlocker returns the first execution that forbids a new one, or nil.
func (st *operationState) firstBlocker() *execRec {
	if st.blockingExec == 0 {
		return nil
	}
	for i := range st.execs.entries {
		if x := &st.execs.entries[i].val; st.blocks(x.state) {
			return x
		}
	}
	return nil
}

// currentExecution returns the latest execution, or nil.
func (st *operationState) currentExecution() *execRec {
	if n := len(st.execs.entries); n > 0 {
		return &st.execs.entries[n-1].val
	}
	return nil
}

// name is how a message names an execution: its id while open, else where
// it was last changed.
func (x *execRec) name() string {
	if x.id != "" {
		return string(x.id)
	}
	return "the execution " + x.state.String() + " at version " + itoa(x.version)
}
