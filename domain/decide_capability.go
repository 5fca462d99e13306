package domain

import "time"

// IssueCapability issues single-use authority bound to this operation, the
// latest decision and its attempt. The latest decision must be Allowed, and
// its attempt must not have ended NotApplied already (a new attempt needs a
// new decision). Issuing while an execution is Executing or Unknown is
// permitted, and useless: the operation barrier refuses such a capability at
// claim time without spending it.
func (o *Operation) IssueCapability(cmd IssueCapability, now time.Time) ([]Event, error) {
	if !o.Exists() {
		return nil, refuse(ReasonOperationUnknown, "no such operation")
	}
	ttl, err := o.validateIssue(cmd)
	if err != nil {
		return nil, err
	}
	d, ok := o.LatestDecision()
	if !ok || d.Verdict != Allowed {
		return nil, refuse(ReasonDecisionNotAllowed, "the latest decision does not allow a refund")
	}
	if cmd.DecisionID != "" && cmd.DecisionID != d.ID {
		return nil, refuse(ReasonDecisionNotAllowed, "decision %s is not the latest (%s)", cmd.DecisionID, d.ID)
	}
	if b := o.blockingExecution(); b != nil && b.State == ExecCompleted {
		return nil, refuse(ReasonOperationCompleted, "execution %s completed", b.ID)
	}
	if cur := o.CurrentExecution(); cur != nil && cur.Attempt >= d.Attempt && cur.State == ExecNotApplied {
		return nil, refuse(ReasonDecisionNotAllowed, "attempt %d ended NotApplied; a new attempt needs a new decision", d.Attempt)
	}
	return []Event{CapabilityIssued{
		CapabilityID: cmd.CapabilityID, DecisionID: d.ID, Attempt: d.Attempt,
		IssuedAt: now, ExpiresAt: now.Add(ttl),
	}}, nil
}

// RevokeCapability withdraws an Issued capability. Spent authority cannot be
// revoked (it is already unusable) and revoked authority stays revoked.
func (o *Operation) RevokeCapability(cmd RevokeCapability, now time.Time) ([]Event, error) {
	if !o.Exists() {
		return nil, refuse(ReasonOperationUnknown, "no such operation")
	}
	if err := checkText("reason", cmd.Reason, MaxTextLength, false); err != nil {
		return nil, err
	}
	if err := checkText("revoked_by", cmd.Actor, MaxIDLength, false); err != nil {
		return nil, err
	}
	c, ok := o.Capabilities[cmd.CapabilityID]
	switch {
	case !ok:
		return nil, refuse(ReasonCapabilityInvalid, "no capability %s on this operation", cmd.CapabilityID)
	case c.State == CapConsumed:
		return nil, refuse(ReasonCapabilityRevokeAfterUse, "capability %s was consumed by execution %s", c.ID, c.Execution)
	case c.State == CapRevoked:
		return nil, refuse(ReasonCapabilityAlreadyRevoked, "capability %s is already revoked", c.ID)
	}
	return []Event{CapabilityRevoked{CapabilityID: c.ID, Reason: cmd.Reason, RevokedBy: cmd.Actor, RevokedAt: now}}, nil
}

// DecideAndIssue evaluates the policy and, when the verdict is Allowed,
// issues a capability under that very decision, as one decision: either both
// events are recorded or neither. A Denied verdict returns the Decided event
// alone.
func (o *Operation) DecideAndIssue(d Decide, c IssueCapability, now time.Time) ([]Event, error) {
	events, err := o.Decide(d, now)
	if err != nil {
		return nil, err
	}
	dec := events[0].(Decided)
	if dec.Verdict != Allowed {
		return events, nil
	}
	ttl, err := o.validateIssue(c)
	if err != nil {
		return nil, err
	}
	return append(events, CapabilityIssued{
		CapabilityID: c.CapabilityID, DecisionID: dec.DecisionID, Attempt: dec.Attempt,
		IssuedAt: now, ExpiresAt: now.Add(ttl),
	}), nil
}

// validateIssue checks an issue command's id and lifetime and returns the
// lifetime to use.
func (o *Operation) validateIssue(cmd IssueCapability) (time.Duration, error) {
	if _, err := ParseCapabilityID(string(cmd.CapabilityID)); err != nil {
		return 0, refuseID("capability_id", err)
	}
	if _, dup := o.Capabilities[cmd.CapabilityID]; dup {
		return 0, refuseField("capability_id", "capability %s already exists", cmd.CapabilityID)
	}
	ttl := cmd.TTL
	if ttl == 0 {
		ttl = DefaultCapabilityTTL
	}
	if ttl < 0 || ttl > MaxCapabilityTTL {
		return 0, refuseField("ttl", "capability ttl %s outside (0, %s]", ttl, MaxCapabilityTTL)
	}
	return ttl, nil
}
