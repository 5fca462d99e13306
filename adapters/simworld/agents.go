package simworld

import (
	"fmt"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
)

// Agent bounds: what one operation's agent may do.
const (
	maxAttempts         = 3  // decisions per operation
	maxIssues           = 12 // capabilities per operation
	approvalLimit int64 = 50_000
)

// agent is the people and systems that request one refund, decide it,
// issue its authority, and react to what became of it: decide again after
// NotApplied (sometimes on facts that changed against it), revoke, issue a
// second capability instead of waiting for reconciliation.
type agent struct {
	op        domain.OperationID
	amount    int64
	overLimit bool // the first decision denies
	requested bool
	attempts  int
	issues    int
	done      bool
	outcome   string
	next      time.Time
}

func newAgents(w *World, n int) []*agent {
	out := make([]*agent, n)
	for i := range out {
		a := &agent{op: domain.OperationID(fmt.Sprintf("OP-%d", i+1))}
		a.amount = int64(100 + w.rng.intn(40_000))
		a.overLimit = w.rng.chance(0.08)
		if a.overLimit {
			a.amount = approvalLimit + 1 + int64(w.rng.intn(10_000))
		}
		a.next = w.clock.Now().Add(w.rng.between(0, 90*time.Second))
		out[i] = a
	}
	return out
}

// by is the agents' cause.
var by = ledger.Cause{Actor: "agent"}

// act is one look at the operation and what the agent does about it.
func (w *World) act(a *agent) {
	a.next = w.clock.Now().Add(w.rng.between(time.Second, 10*time.Second))
	ctx := w.ctx
	l := w.api
	w.apiNotices.flush(ctx)
	after := w.beforeAgentRead(a.op)
	state, err := l.Load(ctx, a.op)
	if after != nil {
		after(err)
	}
	if err != nil {
		w.tracef(nil, "agent %s: cannot read (%s)", a.op, errText(err))
		a.next = w.clock.Now().Add(w.rng.between(5*time.Second, 30*time.Second))
		return
	}
	switch {
	case !state.Exists():
		_, err := l.RequestOperation(ctx, domain.RequestOperation{
			OperationID: a.op, OrderID: "ORD-" + string(a.op), AmountMinor: a.amount, Currency: "EUR",
			OrderTotalMinor: 2 * a.amount, CorrelationID: domain.CorrelationID("COR-" + string(a.op)), RequestedBy: "agent",
		}, by)
		a.requested = true
		w.tracef(nil, "agent requests %s (%d EUR minor) → %s", a.op, a.amount, errText(err))
		a.next = w.clock.Now()
		return
	}
	d, decided := state.LatestDecision()
	status := state.Status()
	switch {
	case status == domain.OpCompleted || status == domain.OpDenied || status == domain.OpEscalated:
		// (An operation whose decision a lossy failover took may be
		// Escalated with none: a lost effect found.)
		a.done, a.outcome = true, string(status)
		w.tracef(nil, "agent %s: %s", a.op, status)
	case !decided:
		w.decide(a, domain.Facts{OrderRefundable: true})
	case status == domain.OpExecuting || status == domain.OpUnknown:
		if w.inject(w.apiProc, FaultAgentSecondCap, "agent %s issues a second capability while %s", a.op, status) {
			w.issue(a)
		}
	case status == domain.OpNotApplied:
		if a.attempts >= maxAttempts || !w.swarm.on(FaultAgentRedecide) {
			a.done, a.outcome = true, "gave up after NotApplied"
			w.tracef(nil, "agent %s: gives up after NotApplied", a.op)
			return
		}
		w.countFault(FaultAgentRedecide, "agent %s decides again after NotApplied", a.op)
		facts := domain.Facts{OrderRefundable: true}
		if w.rng.chance(0.25) {
			facts.RefundedMinor = 2 * a.amount // refunded meanwhile, elsewhere: the policy must deny
		}
		w.decide(a, facts)
	case status == domain.OpAuthorized:
		live := liveCapability(state, d, w.clock.Now())
		switch {
		case live != nil && w.transport.pending(a.op):
			if w.inject(w.apiProc, FaultAgentRevoke, "agent revokes %s", live.ID) {
				err := l.RevokeCapability(ctx, a.op, domain.RevokeCapability{CapabilityID: live.ID, Reason: "agent changed its mind", Actor: "agent"}, by)
				w.tracef(nil, "agent revokes %s → %s", live.ID, errText(err))
			}
		case w.relaysCaughtUp() && !w.transport.pending(a.op):
			// The authority's message was handled (refused) or never made it:
			// the agent issues again, a bounded number of times.
			if a.issues >= maxIssues {
				a.done, a.outcome = true, "authority exhausted"
				w.tracef(nil, "agent %s: gives up, %d capabilities issued", a.op, a.issues)
				return
			}
			w.issue(a)
		}
	}
}

// liveCapability is an Issued, unexpired capability of the latest decision.
func liveCapability(state *domain.Operation, d domain.Decision, now time.Time) *domain.Capability {
	var best *domain.Capability
	for _, c := range state.Capabilities {
		if c.State == domain.CapIssued && c.DecisionID == d.ID && now.Before(c.ExpiresAt) && (best == nil || c.ID > best.ID) {
			best = c
		}
	}
	return best
}

func (w *World) decide(a *agent, facts domain.Facts) {
	a.attempts++
	a.issues++
	dec, c, err := w.api.DecideAndIssue(w.ctx, a.op, domain.Decide{
		Approver: "agent", ApprovalLimitMinor: approvalLimit, Facts: facts, KeyPolicy: w.profile.KeyPolicy,
	}, domain.IssueCapability{}, by)
	w.tracef(nil, "agent decides %s attempt %d → %s %s %s", a.op, dec.Attempt, dec.Verdict, c.CapabilityID, errText(err))
	a.next = w.clock.Now()
}

func (w *World) issue(a *agent) {
	a.issues++
	c, err := w.api.IssueCapability(w.ctx, a.op, domain.IssueCapability{}, by)
	w.tracef(nil, "agent issues %s for %s → %s", c.CapabilityID, a.op, errText(err))
}

// forge is someone who read an execution's id and epoch (anyone with a token
// may) writing for it without its lease secret: the ledger must refuse and
// record it (lease.not-held).
func (w *World) forge() bool {
	c := w.obs.claimed[w.rng.intn(len(w.obs.claimed))]
	op := c.op
	state, err := w.api.Load(w.ctx, op)
	if err != nil {
		return false
	}
	x := state.Execution(c.exec)
	if x == nil {
		return false
	}
	secret := ""
	if w.rng.chance(0.5) {
		secret = fmt.Sprintf("guess-%d", w.rng.intn(1_000_000))
	}
	outcome := domain.NotApplied
	if w.rng.chance(0.3) {
		outcome = domain.Completed
	}
	cause := ledger.Cause{Actor: intruder, CausationID: string(x.ID)}
	switch x.State {
	case domain.ExecExecuting:
		err = w.api.RecordOutcome(w.ctx, op, domain.RecordOutcome{ExecutionID: x.ID, LeaseEpoch: x.LeaseEpoch, LeaseSecret: secret, Outcome: outcome, Detail: "forged"}, cause)
	default:
		err = w.api.RecordLateOutcome(w.ctx, op, domain.RecordLateOutcome{ExecutionID: x.ID, LeaseEpoch: 1, LeaseSecret: secret, Outcome: outcome, Detail: "forged"}, cause)
	}
	w.tracef(nil, "intruder writes %s for %s (%s) without its secret → %s", outcome, x.ID, x.State, errText(err))
	w.obs.forged = append(w.obs.forged, forgedWrite{op: op, exec: x.ID, err: err})
	return true
}

// intruder is the actor of forged writes.
const intruder = "intruder"
