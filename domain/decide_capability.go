package domain

import "time"

// IssueCapability issues authority bound to this operation, the latest
// decision and its attempt, of as many uses as the decision authorized (one
// for a refund). The latest decision must be Allowed; for a single-use kind
// its attempt must not have ended NotApplied already (a new attempt needs a
// new decision); for a kind of bounded use the decision must not have a
// capability yet (one per decision, or its uses would be authorized twice).
// Issuing while an execution is Executing or Unknown is permitted, and
// useless: the operation barrier refuses such a capability at claim time
// without spending it.
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
	if o.Policy.Repeats {
		if c := o.LatestCapability(); c != nil {
			return nil, refuse(ReasonDecisionNotAllowed, "decision %s already issued capability %s of %d uses: one capability per decision, a new one needs a new decision", d.ID, c.ID, c.Uses)
		}
	} else {
		if b := o.blockingExecution(); b != nil && b.State == ExecCompleted {
			return nil, refuse(ReasonOperationCompleted, "execution %s completed", b.ID)
		}
		if cur := o.CurrentExecution(); cur != nil && cur.Attempt >= d.Attempt && cur.State == ExecNotApplied {
			return nil, refuse(ReasonDecisionNotAllowed, "attempt %d ended NotApplied; a new attempt needs a new decision", d.Attempt)
		}
	}
	return []Event{o.issued(cmd.CapabilityID, d.ID, d.Attempt, d.Uses, now, ttl)}, nil
}

// issued is the CapabilityIssued event of a capability of uses uses.
func (o *Operation) issued(id CapabilityID, decision DecisionID, attempt, uses int, now time.Time, ttl time.Duration) CapabilityIssued {
	return CapabilityIssued{
		CapabilityID: id, DecisionID: decision, Kind: o.Kind, Attempt: attempt, Uses: uses,
		IssuedAt: now, ExpiresAt: now.Add(ttl),
	}
}

// RevokeCapability withdraws an Issued capability: every use it has left.
// Spent authority cannot be revoked (it is already unusable) and revoked
// authority stays revoked.
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
	return append(events, o.issued(c.CapabilityID, dec.DecisionID, dec.Attempt, dec.Uses, now, ttl)), nil
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
