package audit

import (
	"time"

	"opledger/domain"
)

// The checks on authority: the request, decisions, capabilities and claims
// (invariants 1, 2, 3, 6, 9 and, for a kind of bounded use, 10).

// requested: S3, once per stream and for the stream's own operation.
func (v *verifier) requested(ev domain.OperationRequested) {
	st := v.st
	switch {
	case st.requested:
		v.emit(S3RequestedFirst, nil, "the operation is requested a second time")
		return
	case ev.OperationID != v.op:
		v.emit(S3RequestedFirst, nil, "OperationRequested names operation %s on the stream of %s", ev.OperationID, v.op)
	case v.rec.Version != 0 && !st.unrequested:
		v.emit(S3RequestedFirst, nil, "OperationRequested at version %d, not 0", v.rec.Version)
	}
	st.requested, st.amount, st.orderTotal = true, ev.AmountMinor, ev.OrderTotalMinor
	if p, ok := effectPolicies[cmpKind(ev.Kind)]; ok {
		st.effect = p
	} else {
		v.emit(S2Decodable, nil, "operation of kind %q, which this audit does not know", clipText(string(ev.Kind)))
	}
}

// cmpKind is the kind an event states ("": a refund, as before kinds).
func cmpKind(k domain.OperationKind) domain.OperationKind {
	if k == "" {
		return domain.KindRefund
	}
	return k
}

// kindStated reports I10 when an event states a kind other than its
// operation's.
func (v *verifier) kindStated(k domain.OperationKind, what string) {
	if k := cmpKind(k); k != v.st.effect.Kind {
		v.emit(I10BoundedUse, nil, "%s states kind %s on an operation of kind %s", what, k, v.st.effect.Kind)
	}
}

// usesStated is the use count an event states (0, unstated, is one for a
// single-use kind, as every event was before kinds existed).
func (v *verifier) usesStated(n int) int {
	if n == 0 && !v.st.effect.Repeats {
		return 1
	}
	return n
}

// decided: I9 (nothing is decided while an execution blocks; an Allowed
// verdict agrees with the policy on its recorded facts), I2 (a decision is
// for the next attempt), I6 (its key is derived).
func (v *verifier) decided(ev domain.Decided) {
	st := v.st
	v.kindStated(ev.Kind, "decision "+string(ev.DecisionID))
	if b := st.firstBlocker(); b != nil {
		need := "every earlier execution NotApplied"
		if st.effect.Repeats {
			need = "no execution open"
		}
		v.emit(I9NewAttemptDecided, []int64{b.version}, "decision %s while %s is %s: a new decision needs %s",
			ev.DecisionID, b.name(), b.state, need)
	} else if want := st.lastAttempt + 1; ev.Attempt != want {
		v.emit(I2AuthorityNeverReset, nil, "decision %s is for attempt %d; the next attempt is %d", ev.DecisionID, ev.Attempt, want)
	}
	uses := v.usesStated(ev.Uses)
	if uses < 1 || uses > st.effect.MaxUses {
		v.emit(I10BoundedUse, nil, "decision %s authorizes %d uses; a %s decision authorizes 1 to %d", ev.DecisionID, ev.Uses, st.effect.Kind, st.effect.MaxUses)
	}
	pol := policyOf(ev.KeyPolicy)
	if st.effect.Repeats && pol == policyReuseFirst {
		v.emit(I10BoundedUse, nil, "decision %s reuses attempt 1's key: a %s takes per-attempt keys, or a later attempt's use shares an earlier one's key", ev.DecisionID, st.effect.Kind)
	}
	if pol == policyUnknown {
		v.emit(I6ProviderKeyDerived, nil, "decision %s has key policy %q, which derives no key", ev.DecisionID, ev.KeyPolicy)
	} else if want := keyFor(st.effect, v.op, pol, ev.Attempt); ev.IdempotencyKey != want {
		v.emit(I6ProviderKeyDerived, nil, "decision %s records provider key %q; attempt %d under %s derives %q",
			ev.DecisionID, ev.IdempotencyKey, ev.Attempt, ev.KeyPolicy, want)
	}
	switch ev.Verdict {
	case domain.Allowed:
		if reasons := v.policyDenies(ev); len(reasons) > 0 {
			v.emit(I9NewAttemptDecided, nil, "decision %s allows attempt %d although %s denies its recorded facts: %v",
				ev.DecisionID, ev.Attempt, ev.PolicyVersion, reasons)
		}
	case domain.Denied:
	default:
		v.emit(S2Decodable, nil, "decision %s has verdict %q", ev.DecisionID, ev.Verdict)
	}
	st.decided = true
	st.latest = decisionRec{id: v.hash.of(string(ev.DecisionID)), attempt: ev.Attempt, uses: int32(uses), allowed: ev.Verdict == domain.Allowed,
		policy: pol, version: v.rec.Version}
}

// policyDenies re-evaluates the policy on the facts a decision recorded,
// with the domain's own rules, when the decision names this build's policy
// version. It returns the reasons the policy denies them, or nil.
func (v *verifier) policyDenies(ev domain.Decided) []string {
	if ev.PolicyVersion != v.st.effect.PolicyVersion || !v.st.requested {
		return nil
	}
	probe := domain.NewOperation()
	if err := probe.Evolve(domain.OperationRequested{OperationID: v.op, Kind: v.st.effect.Kind, AmountMinor: v.st.amount, OrderTotalMinor: v.st.orderTotal}); err != nil {
		return nil
	}
	approver := ev.Approver
	if approver == "" || len(approver) > domain.MaxIDLength {
		approver = "audit"
	}
	cmd := domain.Decide{DecisionID: "DEC-AUDIT", Approver: approver, ApprovalLimitMinor: ev.ApprovalLimit,
		Facts: ev.Facts, Uses: ev.Uses, KeyPolicy: ev.KeyPolicy}
	if ev.ExportFacts != nil {
		cmd.ExportFacts = *ev.ExportFacts
	}
	out, err := probe.Decide(cmd, ev.DecidedAt)
	if err != nil || len(out) != 1 {
		return nil // the recorded decision is not one the policy can re-evaluate (malformed): other checks say why
	}
	if d, ok := out[0].(domain.Decided); ok && d.Verdict == domain.Denied {
		return d.Reasons
	}
	return nil
}

// capabilityIssued: I2 (authority is never issued again), I9 (it follows the
// latest Allowed decision, for that decision's attempt, which has not ended
// NotApplied). Issuing while an execution is open is permitted, and useless:
// the barrier refuses its claim (I3 would catch one that got through).
func (v *verifier) capabilityIssued(ev domain.CapabilityIssued) {
	st := v.st
	k := v.hash.of(string(ev.CapabilityID))
	if c := st.caps.get(k); c != nil {
		v.emit(I2AuthorityNeverReset, []int64{c.version}, "capability %s is issued again (already %s): authority is never reissued or reset",
			ev.CapabilityID, capStateName(c.state))
		return
	}
	v.kindStated(ev.Kind, "capability "+string(ev.CapabilityID))
	uses := v.usesStated(ev.Uses)
	switch {
	case uses < 1 || uses > st.effect.MaxUses:
		v.emit(I10BoundedUse, nil, "capability %s of %d uses; a %s capability has 1 to %d", ev.CapabilityID, ev.Uses, st.effect.Kind, st.effect.MaxUses)
	case st.decided && v.hash.of(string(ev.DecisionID)) == st.latest.id && int32(uses) != st.latest.uses:
		v.emit(I10BoundedUse, []int64{st.latest.version}, "capability %s of %d uses under decision %s, which authorized %d", ev.CapabilityID, uses, ev.DecisionID, st.latest.uses)
	}
	if st.effect.Repeats {
		d := v.hash.of(string(ev.DecisionID))
		for i := range st.caps.entries {
			if c := &st.caps.entries[i].val; c.decision == d {
				v.emit(I10BoundedUse, []int64{c.version}, "capability %s is a second one under decision %s: its uses would be authorized twice", ev.CapabilityID, ev.DecisionID)
				break
			}
		}
	}
	dec := st.latest
	pol := policyUnknown
	switch {
	case !st.decided:
		v.emit(I9NewAttemptDecided, nil, "capability %s issued with no decision recorded", ev.CapabilityID)
	case v.hash.of(string(ev.DecisionID)) != dec.id:
		v.emit(I9NewAttemptDecided, []int64{dec.version}, "capability %s issued under decision %s, which is not the latest decision",
			ev.CapabilityID, ev.DecisionID)
	case !dec.allowed:
		v.emit(I9NewAttemptDecided, []int64{dec.version}, "capability %s issued under decision %s, which denied", ev.CapabilityID, ev.DecisionID)
	case ev.Attempt != dec.attempt:
		v.emit(I9NewAttemptDecided, []int64{dec.version}, "capability %s is for attempt %d; its decision %s is for attempt %d",
			ev.CapabilityID, ev.Attempt, ev.DecisionID, dec.attempt)
	default:
		pol = dec.policy
	}
	if cur := st.currentExecution(); cur != nil && cur.state == exNotApplied && int(cur.attempt) >= ev.Attempt {
		v.emit(I9NewAttemptDecided, []int64{cur.version}, "capability %s is for attempt %d, which ended NotApplied: a new attempt is decided again first",
			ev.CapabilityID, ev.Attempt)
	}
	st.caps.put(k, capRec{decision: v.hash.of(string(ev.DecisionID)), at: ev.ExpiresAt.UnixNano(), version: v.rec.Version,
		attempt: int32(ev.Attempt), uses: int32(max(uses, 1)), state: capIssued, policy: pol})
}

// capabilityRevoked: S4. Spent authority stays spent: revoking a consumed
// capability does not make it anything but consumed.
func (v *verifier) capabilityRevoked(ev domain.CapabilityRevoked) {
	c := v.st.caps.get(v.hash.of(string(ev.CapabilityID)))
	if c == nil {
		v.emit(S4ReferencesResolve, nil, "revokes capability %s, never issued on this operation", ev.CapabilityID)
		return
	}
	if c.state == capIssued {
		c.state, c.version = capRevoked, v.rec.Version
	}
}

// claimed: I1 (the capability is consumed once, and only while issued and
// unexpired), I2 (for its own attempt, not yet executed), I9 (under the
// latest Allowed decision), I6 (the key derives from that decision), I3 (no
// execution blocks), I4 (not opened by a duplicate delivery). For a kind of
// bounded use, I10 instead of I1's "once" and I3: at most its uses, in
// order, one execution open at a time, a key of its own for every use.
func (v *verifier) claimed(ev domain.Claimed) {
	st := v.st
	bounded := st.effect.Repeats
	k := v.hash.of(string(ev.CapabilityID))
	c := st.caps.get(k)
	v.kindStated(ev.Kind, "claim of execution "+string(ev.ExecutionID))
	use := v.usesStated(ev.Use)
	switch {
	case c == nil:
		v.emit(I1CapabilityConsumedOnce, nil, "claims capability %s, never issued on this operation", ev.CapabilityID)
	case c.state == capConsumed && bounded:
		v.emit(I10BoundedUse, []int64{c.version}, "claims capability %s beyond its %d uses (its last claimed at version %d)", ev.CapabilityID, c.uses, c.version)
	case c.state == capConsumed:
		v.emit(I1CapabilityConsumedOnce, []int64{c.version}, "consumes capability %s a second time (consumed at version %d)", ev.CapabilityID, c.version)
	case c.state == capRevoked:
		v.emit(I1CapabilityConsumedOnce, []int64{c.version}, "claims capability %s, revoked at version %d", ev.CapabilityID, c.version)
	case !ev.ClaimedAt.Before(time.Unix(0, c.at)):
		v.emit(I1CapabilityConsumedOnce, []int64{c.version}, "claims capability %s at %s; it expired at %s",
			ev.CapabilityID, stamp(ev.ClaimedAt), stamp(time.Unix(0, c.at)))
	}
	pol := st.latest.policy
	if c != nil {
		if int(c.attempt) != ev.Attempt {
			v.emit(I2AuthorityNeverReset, []int64{c.version}, "claim for attempt %d under capability %s of attempt %d", ev.Attempt, ev.CapabilityID, c.attempt)
		}
		switch {
		case c.decision != st.latest.id:
			v.emit(I9NewAttemptDecided, []int64{st.latest.version}, "claims capability %s whose decision was superseded by the decision at version %d",
				ev.CapabilityID, st.latest.version)
		case !st.latest.allowed:
			v.emit(I9NewAttemptDecided, []int64{st.latest.version}, "claims capability %s under a decision that denied", ev.CapabilityID)
		}
		if c.policy != policyUnknown {
			pol = c.policy
		}
	}
	switch {
	case !bounded && ev.Attempt <= st.lastAttempt:
		v.emit(I2AuthorityNeverReset, nil, "claim for attempt %d, which has an execution already: a new attempt needs a new decision and a new capability", ev.Attempt)
	case bounded && (ev.Attempt < st.lastAttempt || ev.Attempt == st.lastAttempt && k != st.lastCap):
		v.emit(I2AuthorityNeverReset, nil, "claim for attempt %d, which has executions under another capability already: a new attempt needs a new decision and a new capability", ev.Attempt)
	}
	if c != nil && c.state != capConsumed && use != int(c.claims)+1 {
		v.emit(I10BoundedUse, []int64{c.version}, "claims use %d of capability %s, whose next use is %d", ev.Use, ev.CapabilityID, c.claims+1)
	}
	if pol != policyUnknown {
		if want := st.effect.UseKey(keyFor(st.effect, v.op, pol, ev.Attempt), use); ev.IdempotencyKey != want {
			v.emit(I6ProviderKeyDerived, nil, "execution %s carries provider key %q; its attempt %d, use %d derives %q", ev.ExecutionID, ev.IdempotencyKey, ev.Attempt, use, want)
		}
	}
	if b := st.firstBlocker(); b != nil {
		if bounded {
			v.emit(I10BoundedUse, []int64{b.version}, "opens execution %s while %s is %s: one execution open at a time", ev.ExecutionID, b.name(), b.state)
		} else {
			v.emit(I3OneConsequentialExecution, []int64{b.version}, "opens execution %s while %s is %s", ev.ExecutionID, b.name(), b.state)
		}
	}
	if bounded {
		key := v.hash.of(string(ev.IdempotencyKey))
		if st.keys.has(key) {
			v.emit(I10BoundedUse, nil, "execution %s carries provider key %q, which an earlier execution of the operation had: every use has its own", ev.ExecutionID, ev.IdempotencyKey)
		}
		st.keys.add(key)
	}
	m := v.hash.of(string(ev.MessageID))
	// A claim decided before the duplicate was seen may be appended after
	// it: the duplicate is in the operation's evidence stream, which the
	// claim's append is not fenced with (a worker that froze between its
	// decision and its append). A claim decided once the duplicate was
	// recorded is the violation.
	if at := st.duplicated.get(m); at != nil && ev.ClaimedAt.UnixNano() >= *at {
		v.emit(I4UnknownNeverInferred, nil, "opens execution %s on message %s, already recorded as a duplicate delivery", ev.ExecutionID, ev.MessageID)
	}

	if c == nil {
		c = st.caps.put(k, capRec{attempt: int32(ev.Attempt), uses: 1})
	}
	c.claims++
	c.version = v.rec.Version
	if c.claims >= c.uses {
		c.state, c.at = capConsumed, ev.ClaimedAt.UnixNano()
	}
	st.lastCap = k
	st.presented.add(m)
	st.lastAttempt = max(st.lastAttempt, ev.Attempt)
	xk := v.hash.of(string(ev.ExecutionID))
	x := st.execs.get(xk)
	if x != nil {
		v.emit(S4ReferencesResolve, []int64{x.version}, "execution id %s is used a second time", ev.ExecutionID)
	} else {
		x = st.execs.put(xk, execRec{})
	}
	x.epoch, x.leaseExpires, x.owner, x.attempt = ev.LeaseEpoch, ev.LeaseExpiresAt.UnixNano(), v.hash.of(ev.WorkerID), int32(ev.Attempt)
	x.id, x.unknown = ev.ExecutionID, nil
	x.unbound = v.leaseBinding(ev)
	v.setState(x, exExecuting)
}

// leaseBinding checks a claim's lease secret digest and reports whether the
// claim is unbound (it carries none). I5: once the log holds a claim bound to
// its holder, every later claim must be (an unbound one accepts no executor
// write, so a version that writes them is fencing nothing); S2: a digest is
// SHA-256 in lower-case hex.
func (v *verifier) leaseBinding(ev domain.Claimed) bool {
	d := ev.LeaseSecretDigest
	switch {
	case d == "":
		if v.boundSeen {
			v.emit(I5EpochFencing, nil, "opens execution %s without a lease secret digest, after claims that carry one: its lease is bound to no holder", ev.ExecutionID)
		}
		return true
	case !isDigest(d):
		v.emit(S2Decodable, nil, "execution %s carries lease secret digest %q, not SHA-256 in lower-case hex", ev.ExecutionID, clipText(d))
	}
	v.boundSeen = true
	return false
}

// holderWrite reports I5 for an executor write accepted for an execution
// claimed without a lease secret digest once the log binds leases to their
// holder: such an execution accepts no executor write (nobody can prove to
// hold its lease); it lapses to Unknown and is reconciled.
func (v *verifier) holderWrite(x *execRec, id domain.ExecutionID) {
	if x.unbound && v.boundSeen {
		v.emit(I5EpochFencing, nil, "%s accepted for %s, claimed without a lease secret digest: no executor write holds its lease", v.rec.Type, id)
	}
}

func isDigest(d string) bool {
	if len(d) != domain.LeaseSecretDigestLength {
		return false
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// clipText quotes at most 80 bytes of untrusted text in a report.
func clipText(s string) string {
	safe, _ := domain.EvidenceText(s, 80)
	return safe
}

func capStateName(s capState) string {
	switch s {
	case capIssued:
		return string(domain.CapIssued)
	case capConsumed:
		return string(domain.CapConsumed)
	case capRevoked:
		return string(domain.CapRevoked)
	}
	return "unknown"
}
