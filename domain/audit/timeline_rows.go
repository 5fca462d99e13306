package audit

import (
	"fmt"
	"strings"
	"time"

	"opledger/domain"
)

// describe fills the row fields one event carries, with its payload time;
// false for an event type it has no case for (Describes).
func describe(e domain.Event) (TimelineRow, bool) {
	switch ev := e.(type) {
	case domain.OperationRequested:
		if ev.Kind == domain.KindExportDownload {
			return TimelineRow{Time: ev.RequestedAt, Actor: ev.RequestedBy,
				Detail: fmt.Sprintf("%s of export %s, correlation %s", ev.Kind, ev.ExportID, ev.CorrelationID)}, true
		}
		d := fmt.Sprintf("refund of %s on order %s, correlation %s", domain.FormatMoney(ev.AmountMinor, ev.Currency), ev.OrderID, ev.CorrelationID)
		if ev.OrderTotalMinor > 0 {
			d += ", order total " + domain.FormatMoney(ev.OrderTotalMinor, ev.Currency)
		}
		return TimelineRow{Time: ev.RequestedAt, Actor: ev.RequestedBy, Detail: d}, true
	case domain.Decided:
		if ev.ExportFacts != nil {
			return TimelineRow{Time: ev.DecidedAt, Outcome: string(ev.Verdict), Reason: strings.Join(ev.Reasons, ","),
				Detail: fmt.Sprintf("decision %s for attempt %d, %s, provider keys %s-u1..u%d (%s), %s, approver %s, facts export_ready=%t",
					ev.DecisionID, ev.Attempt, uses(ev.Uses), ev.IdempotencyKey, ev.Uses, ev.KeyPolicy, ev.PolicyVersion, ev.Approver, ev.ExportFacts.ExportReady)}, true
		}
		return TimelineRow{Time: ev.DecidedAt, Outcome: string(ev.Verdict), Reason: strings.Join(ev.Reasons, ","),
			Detail: fmt.Sprintf("decision %s for attempt %d, provider key %s (%s), %s, approver %s (limit %d), facts %s",
				ev.DecisionID, ev.Attempt, ev.IdempotencyKey, ev.KeyPolicy, ev.PolicyVersion, ev.Approver, ev.ApprovalLimit, facts(ev.Facts))}, true
	case domain.CapabilityIssued:
		return TimelineRow{Time: ev.IssuedAt, Capability: ev.CapabilityID, Outcome: string(domain.CapIssued),
			Detail: fmt.Sprintf("%s, attempt %d under %s, expires %s", uses(ev.Uses), ev.Attempt, ev.DecisionID, stamp(ev.ExpiresAt))}, true
	case domain.CapabilityRevoked:
		return TimelineRow{Time: ev.RevokedAt, Capability: ev.CapabilityID, Outcome: string(domain.CapRevoked),
			Actor: ev.RevokedBy, Detail: ev.Reason}, true
	case domain.Claimed:
		consumed := "capability consumed"
		if ev.Kind == domain.KindExportDownload {
			consumed = fmt.Sprintf("use %d of the capability consumed", ev.Use)
		}
		return TimelineRow{Time: ev.ClaimedAt, Worker: ev.WorkerID, Execution: ev.ExecutionID, Epoch: ev.LeaseEpoch, Message: ev.MessageID,
			Capability: ev.CapabilityID, Outcome: string(domain.ExecExecuting),
			Detail: fmt.Sprintf("%s for attempt %d, lease until %s, provider key %s",
				consumed, ev.Attempt, stamp(ev.LeaseExpiresAt), ev.IdempotencyKey)}, true
	case domain.DeliveryDuplicated:
		d := "message seen before on this operation; nothing executed, no state changed"
		if ev.ExecutionID != "" {
			d = fmt.Sprintf("message seen before; %s still %s; nothing executed, no state changed", ev.ExecutionID, ev.ExecutionState)
		}
		return TimelineRow{Time: ev.SeenAt, Worker: ev.WorkerID, Execution: ev.ExecutionID, Message: ev.MessageID, Capability: ev.CapabilityID,
			Outcome: string(domain.StatusDuplicateDelivery), Reason: string(domain.ReasonDeliveryDuplicate), Detail: d}, true
	case domain.PresentationRejected:
		d := "execution not attempted"
		if ev.ExecutionAttempted {
			d = "EXECUTION ATTEMPTED"
		}
		if ev.ReplaySuspected {
			d += "; replay suspected"
		}
		return TimelineRow{Time: ev.RejectedAt, Worker: ev.WorkerID, Execution: ev.ExecutionID, Message: ev.MessageID, Capability: ev.CapabilityID,
			Outcome: string(ev.Status), Reason: string(ev.Reason), Detail: joinNonEmpty(d, ev.Detail)}, true
	case domain.LeaseRenewed:
		return TimelineRow{Time: ev.RenewedAt, Execution: ev.ExecutionID, Epoch: ev.LeaseEpoch,
			Detail: "lease until " + stamp(ev.LeaseExpiresAt)}, true
	case domain.OutcomeRecorded:
		return TimelineRow{Time: ev.RecordedAt, Execution: ev.ExecutionID, Epoch: ev.LeaseEpoch, Outcome: string(ev.Outcome),
			Detail: joinNonEmpty(ref(ev.ProviderReference), ev.Detail)}, true
	case domain.OutcomeUnknown:
		return TimelineRow{Time: ev.RecordedAt, Execution: ev.ExecutionID, Epoch: ev.LeaseEpoch, Outcome: string(domain.ExecUnknown),
			Detail: joinNonEmpty("the executor cannot tell whether the effect happened", ev.Cause)}, true
	case domain.LeaseLapsed:
		return TimelineRow{Time: ev.LapsedAt, Execution: ev.ExecutionID, Epoch: ev.ToEpoch, EpochFrom: ev.FromEpoch,
			Outcome: string(domain.ExecUnknown), Reason: "lease.lapsed",
			Detail: fmt.Sprintf("lease expired %s; epoch %d fenced off", stamp(ev.LeaseExpiredAt), ev.FromEpoch)}, true
	case domain.LateOutcomeRecorded:
		return TimelineRow{Time: ev.RecordedAt, Execution: ev.ExecutionID, Epoch: ev.StaleEpoch, Outcome: string(ev.Outcome),
			Detail: joinNonEmpty("late evidence from the stale executor", ref(ev.ProviderReference), ev.Detail)}, true
	case domain.Reconciled:
		return TimelineRow{Time: ev.ReconciledAt, Actor: ev.Actor, Execution: ev.ExecutionID, Outcome: string(ev.Outcome), Reason: string(ev.Method),
			Detail: joinNonEmpty(ref(ev.ProviderReference), ev.Evidence)}, true
	case domain.Escalated:
		return TimelineRow{Time: ev.EscalatedAt, Execution: ev.ExecutionID, Outcome: string(domain.ExecEscalated), Reason: ev.Reason,
			Detail: ev.Detail}, true
	case domain.WriteRefused:
		d := fmt.Sprintf("%s refused at epoch %d (current %d)", ev.Command, ev.LeaseEpoch, ev.CurrentEpoch)
		if ev.Outcome != "" {
			d += "; it reported " + string(ev.Outcome)
		}
		switch ev.SecretCheck {
		case domain.SecretMissing, domain.SecretWrong:
			d += "; lease secret " + string(ev.SecretCheck) + ": not the lease holder"
		case domain.SecretUnbound:
			d += "; the execution's lease is bound to no holder"
		}
		if ev.Field != "" {
			d += "; invalid " + ev.Field
		}
		if len(ev.Escaped) > 0 {
			d += " (kept escaped: " + strings.Join(ev.Escaped, ", ") + ")"
		}
		return TimelineRow{Time: ev.RefusedAt, Execution: ev.ExecutionID, Epoch: ev.LeaseEpoch, Reason: string(ev.Reason),
			Worker: ev.WorkerID, Detail: joinNonEmpty(d, ref(ev.ProviderReference), ev.Detail)}, true
	case domain.RefusalsSummarized:
		return summaryRow(ev), true
	case domain.LostEffectEscalated:
		d := fmt.Sprintf("an effect the store lost, found by %s: key %s, %s", ev.Source, ev.IdempotencyKey, ev.Outcome)
		if ev.LostExecutionID != "" {
			d += ", made for execution " + string(ev.LostExecutionID)
		}
		return TimelineRow{Time: ev.FoundAt, Execution: ev.ExecutionID, Outcome: string(domain.ExecEscalated), Reason: string(domain.ReasonEffectLost),
			Detail: joinNonEmpty(d, ref(ev.ProviderReference), ev.Detail)}, true
	case domain.LogRegressed:
		return TimelineRow{Time: ev.NoticedAt, Actor: ev.Noticer, Outcome: "LogRegressed",
			Detail: joinNonEmpty(fmt.Sprintf("%s saw version %d of %s, the store holds %d", ev.Cache, ev.SeenVersion, ev.Stream, ev.HeldVersion), ev.Detail)}, true
	case domain.LogRegressionAcknowledged:
		return TimelineRow{Time: ev.AcknowledgedAt, Actor: ev.Operator, Outcome: "acknowledged",
			Detail: joinNonEmpty(fmt.Sprintf("%d log regressions acknowledged, through version %d", ev.Regressions, ev.Through), ev.Note)}, true
	}
	return TimelineRow{}, false
}

// summaryRow is the row of a summary of refusals past the evidence bound:
// its count, per reason, over which times, by whom, with its samples.
func summaryRow(ev domain.RefusalsSummarized) TimelineRow {
	r := TimelineRow{Time: ev.SummarizedAt, Outcome: fmt.Sprintf("%d counted", ev.Count), Count: ev.Count}
	reasons := make([]string, 0, len(ev.Reasons))
	for _, rc := range ev.Reasons {
		reasons = append(reasons, fmt.Sprintf("%d %s %s", rc.Count, rc.Type, rc.Reason))
	}
	if len(ev.Reasons) > 0 {
		r.Reason = string(ev.Reasons[0].Reason)
	}
	switch ev.Scope {
	case domain.ScopeCapability:
		r.Capability = domain.CapabilityID(ev.ScopeID)
	case domain.ScopeExecution, domain.ScopeHolder:
		r.Execution = domain.ExecutionID(ev.ScopeID)
	}
	key := domain.EvidenceKey{Scope: ev.Scope, ID: ev.ScopeID}
	d := fmt.Sprintf("%d refusals of %s past the bound (%d per key, %d per stream, window %s to %s), from %s to %s: %s",
		ev.Count, key, ev.BoundPerKey, ev.BoundPerStream, stamp(ev.WindowStart), stamp(ev.WindowEnd), stamp(ev.FirstAt), stamp(ev.LastAt),
		strings.Join(reasons, ", "))
	principals := make([]string, 0, len(ev.Principals)+1)
	for _, p := range ev.Principals {
		principals = append(principals, fmt.Sprintf("%s (%d)", p.Principal, p.Count))
	}
	if ev.OtherPrincipals > 0 {
		principals = append(principals, fmt.Sprintf("others (%d)", ev.OtherPrincipals))
	}
	samples := make([]string, 0, len(ev.Samples))
	for _, s := range ev.Samples {
		samples = append(samples, joinNonEmpty(s.Type+" "+string(s.Reason), string(s.MessageID), string(s.CapabilityID),
			string(s.ExecutionID), s.Command, workerText(s.WorkerID), s.Detail))
	}
	r.Detail = joinNonEmpty(d, "by "+strings.Join(principals, ", "), "samples: "+strings.Join(samples, " | "))
	// Who caused the refusals, not the ledger that counted them.
	switch n := len(ev.Principals); {
	case n == 1 && ev.OtherPrincipals == 0:
		r.Actor = ev.Principals[0].Principal
	case ev.OtherPrincipals > 0:
		r.Actor = fmt.Sprintf("more than %d principals", n)
	case n > 1:
		r.Actor = fmt.Sprintf("%d principals", n)
	}
	return r
}

func workerText(w string) string {
	if w == "" {
		return ""
	}
	return "worker_id " + w
}

func facts(f domain.Facts) string {
	s := fmt.Sprintf("refundable=%t chargeback=%t refunded=%d", f.OrderRefundable, f.ChargebackOpen, f.RefundedMinor)
	if f.OrderTotalMinor > 0 {
		s += fmt.Sprintf(" order_total=%d", f.OrderTotalMinor)
	}
	return s
}

// uses says how many uses authority has: "single use", "3 uses".
func uses(n int) string {
	if n <= 1 {
		return "single use"
	}
	return fmt.Sprintf("%d uses", n)
}

// stamp renders a time inside a detail, in UTC.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func ref(r string) string {
	if r == "" {
		return ""
	}
	return "provider reference " + r
}

func joinNonEmpty(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p)
	}
	return b.String()
}
