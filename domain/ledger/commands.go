package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/domain"
	"opledger/eventstore"
)

// RequestOperation opens a new operation stream (NoStream: a second request
// for the same id is refused with operation.exists).
func (h *Handler) RequestOperation(ctx context.Context, cmd domain.RequestOperation, by Cause) (*domain.Operation, error) {
	if by.CorrelationID == "" {
		by.CorrelationID = cmd.CorrelationID
	}
	state, _, err := h.Execute(ctx, cmd.OperationID, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.Request(cmd, now)
	})
	return state, err
}

// Decide evaluates the policy for the operation's next attempt. A Denied
// verdict is a recorded decision, not an error.
func (h *Handler) Decide(ctx context.Context, op domain.OperationID, cmd domain.Decide, by Cause) (domain.Decided, *domain.Operation, error) {
	state, events, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		c := cmd
		if c.DecisionID == "" {
			c.DecisionID = domain.DecisionID(domain.ChildID(domain.PrefixDecision, s.ID, len(s.Decisions)+1))
		}
		return s.Decide(c, now)
	})
	if err != nil {
		return domain.Decided{}, state, err
	}
	return events[0].(domain.Decided), state, nil
}

// IssueCapability issues authority, of the uses the latest Allowed decision
// authorized (a refund: one), under that decision.
func (h *Handler) IssueCapability(ctx context.Context, op domain.OperationID, cmd domain.IssueCapability, by Cause) (domain.CapabilityIssued, error) {
	_, events, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		c := cmd
		if c.CapabilityID == "" {
			c.CapabilityID = domain.CapabilityID(domain.ChildID(domain.PrefixCapability, s.ID, len(s.Capabilities)+1))
		}
		return s.IssueCapability(c, now)
	})
	if err != nil {
		return domain.CapabilityIssued{}, err
	}
	return events[0].(domain.CapabilityIssued), nil
}

// DecideAndIssue evaluates the policy and, when Allowed, issues a capability
// under that decision in the same append. The capability is the zero value
// when the verdict is Denied.
func (h *Handler) DecideAndIssue(ctx context.Context, op domain.OperationID, d domain.Decide, c domain.IssueCapability, by Cause) (domain.Decided, domain.CapabilityIssued, error) {
	_, events, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		dc, cc := d, c
		if dc.DecisionID == "" {
			dc.DecisionID = domain.DecisionID(domain.ChildID(domain.PrefixDecision, s.ID, len(s.Decisions)+1))
		}
		if cc.CapabilityID == "" {
			cc.CapabilityID = domain.CapabilityID(domain.ChildID(domain.PrefixCapability, s.ID, len(s.Capabilities)+1))
		}
		return s.DecideAndIssue(dc, cc, now)
	})
	if err != nil {
		return domain.Decided{}, domain.CapabilityIssued{}, err
	}
	var issued domain.CapabilityIssued
	if len(events) > 1 {
		issued = events[1].(domain.CapabilityIssued)
	}
	return events[0].(domain.Decided), issued, nil
}

// RevokeCapability withdraws unused authority.
func (h *Handler) RevokeCapability(ctx context.Context, op domain.OperationID, cmd domain.RevokeCapability, by Cause) error {
	_, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.RevokeCapability(cmd, now)
	})
	return err
}

// ClaimOutcome is a presentation's answer together with the operation as the
// claim left it (amount, currency and order come from here, never from the
// message).
type ClaimOutcome struct {
	domain.ClaimResult
	Operation *domain.Operation
	// LeaseSecret, when Status is Claimed, is the secret that binds the new
	// execution's lease to this caller: every renewal, outcome and late
	// outcome for the execution must present it. It is handed out here
	// only, once; the ledger keeps its digest (Claimed.LeaseSecretDigest),
	// never the secret. Never log it.
	LeaseSecret string
}

// Claim presents a capability for operation op. Every answer but a store
// failure or a malformed command is recorded in the ledger before Claim
// returns: the Claimed event, or the evidence of the refusal. A presentation
// to an operation that does not exist is recorded in the unattributed
// evidence stream of the day.
//
// On any error, nothing may be executed: ErrUnavailable in particular means
// the claim's fate is not known to this caller (invariant 8).
//
// The handler mints the lease secret (cmd.LeaseSecretDigest is overwritten
// with its digest): a Claimed answer carries it in LeaseSecret. A caller
// that loses the answer cannot write for the execution; its lease lapses to
// Unknown and the reconciler asks the provider.
//
// The events' actor is the worker id: an in-process worker is its own
// principal. A caller that authenticated someone else uses ClaimAs.
func (h *Handler) Claim(ctx context.Context, op domain.OperationID, cmd domain.Claim) (ClaimOutcome, error) {
	return h.ClaimAs(ctx, op, cmd, Cause{Actor: cmd.WorkerID})
}

// ClaimAs is Claim on behalf of an authenticated principal: by.Actor (a
// token's name) is the actor of every event the presentation causes, and
// the command's worker id stays what it is, the lease's worker label
// (Claimed, PresentationRejected, DeliveryDuplicated record it beside the
// actor, never instead of it). by.CausationID and by.CorrelationID default
// to the message and the command's correlation id.
func (h *Handler) ClaimAs(ctx context.Context, op domain.OperationID, cmd domain.Claim, by Cause) (ClaimOutcome, error) {
	if by.Actor == "" {
		by.Actor = cmd.WorkerID
	}
	if by.CausationID == "" {
		by.CausationID = string(cmd.MessageID)
	}
	if by.CorrelationID == "" {
		by.CorrelationID = cmd.CorrelationID
	}
	secret := NewLeaseSecret()
	cmd.LeaseSecretDigest = domain.LeaseSecretDigest(secret)
	var result domain.ClaimResult
	state, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		c := cmd
		if c.ExecutionID == "" && s.Exists() {
			c.ExecutionID = domain.ExecutionID(domain.ChildID(domain.PrefixExecution, s.ID, len(s.Executions)+1))
		}
		claim := s.Claim
		if _, known := s.Messages[c.MessageID]; !known && s.Exists() && len(s.Executions) > 0 {
			// A message refused before is recorded in the evidence stream,
			// not in the state: it is a duplicate all the same. Before any
			// execution a message refused before is refused again rather
			// than answered a duplicate (a refusal then names a capability
			// expired, revoked, superseded, of another attempt or operation,
			// or none the operation has issued), so the first claim of an
			// operation reads no evidence stream.
			seen, err := h.evidence.seenMessage(ctx, op, c.MessageID)
			if err != nil {
				return nil, err
			}
			if seen {
				claim = s.ClaimSeen
			}
		}
		r, err := claim(c, now)
		if err != nil {
			return nil, err
		}
		result = r
		return r.Events, nil
	})
	var refusal *domain.Refusal
	if errors.As(err, &refusal) && refusal.Reason == domain.ReasonOperationUnknown {
		return h.claimUnattributed(ctx, op, cmd, by)
	}
	if err != nil {
		return ClaimOutcome{}, err
	}
	out := ClaimOutcome{ClaimResult: result, Operation: state}
	if result.Status == domain.StatusClaimed {
		out.LeaseSecret = secret
	}
	return out, nil
}

func (h *Handler) claimUnattributed(ctx context.Context, op domain.OperationID, cmd domain.Claim, by Cause) (ClaimOutcome, error) {
	now := h.cfg.Clock.Now()
	ev := domain.UnattributedPresentation(op, cmd.MessageID, cmd.CapabilityID, cmd.WorkerID, domain.ReasonOperationUnknown, "no such operation", now)
	if err := h.RecordUnattributed(ctx, ev, by); err != nil {
		return ClaimOutcome{}, err
	}
	return ClaimOutcome{ClaimResult: domain.ClaimResult{
		Status: domain.StatusInvalid, Reason: domain.ReasonOperationUnknown, Events: []domain.Event{ev},
	}}, nil
}

// RecordUnattributed appends evidence that cannot be tied to an existing
// operation (an unknown operation, a forged or malformed capability) to
// the unattributed evidence stream of the day, under the evidence bound
// (by event or counted in a summary). It is never dropped: a failure is
// returned.
func (h *Handler) RecordUnattributed(ctx context.Context, ev domain.PresentationRejected, by Cause) error {
	return h.recordUnattributed(ctx, ev, by)
}

// recordUnattributed appends ev to the unattributed evidence stream of the
// day (domain.UnattributedStreamFor, by the ledger's clock). A refusal is
// kept under the evidence bound as an operation's evidence is, per
// operation named and per stream (EvidenceBound): past it, counted into a
// summary, so that what any number of hostile callers leave there grows by
// a bounded number of events an hour. Any other evidence (a lost effect)
// is appended as it is.
func (h *Handler) recordUnattributed(ctx context.Context, ev domain.Event, by Cause) error {
	now := h.cfg.Clock.Now()
	stream := domain.UnattributedStreamFor(now)
	if p, ok := ev.(domain.PresentationRejected); ok {
		if err := h.evidence.record(ctx, p.OperationID, stream, by.CorrelationID, by, []domain.Event{ev}, decidedOn{}); err != nil {
			return fmt.Errorf("record evidence: %w", err)
		}
		return nil
	}
	if _, err := h.appendEvents(ctx, stream, eventstore.Any(), "", by, now, []domain.Event{ev}); err != nil {
		return fmt.Errorf("record evidence: %w", err)
	}
	return nil
}

// EscalateLostEffect records an effect the executor made, or may have
// made, that the ledger may not account for (see
// domain.Operation.EscalateLostEffect): in op's stream, opening an
// Escalated execution for a person, unless an execution accounts for it
// already; when op does not exist, as evidence in the unattributed
// evidence stream of the day (never dropped). It reports whether it recorded an
// escalation (false: accounted for, or nothing was made).
func (h *Handler) EscalateLostEffect(ctx context.Context, op domain.OperationID, cmd domain.EscalateLostEffect, by Cause) (bool, error) {
	_, events, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.EscalateLostEffect(cmd, now)
	})
	var refusal *domain.Refusal
	if errors.As(err, &refusal) && refusal.Reason == domain.ReasonOperationUnknown {
		if cmd.Outcome == domain.NotApplied {
			return false, nil
		}
		if err := h.recordUnattributed(ctx, domain.LostEffectEvidence(op, cmd, h.cfg.Clock.Now()), by); err != nil {
			return false, err
		}
		return true, nil
	}
	return len(events) > 0, err
}

// RenewLease extends the lease under its epoch, by the holder of its secret;
// a *domain.Refusal with lease.lost or lease.not-held means the caller must
// stop: cancel its provider calls and start no further request. by.Actor
// defaults to the command's worker id (kept escaped if it is not printable).
func (h *Handler) RenewLease(ctx context.Context, op domain.OperationID, cmd domain.RenewLease, by Cause) (domain.LeaseRenewed, error) {
	if by.Actor == "" {
		by.Actor, _ = domain.EvidenceText(cmd.WorkerID, domain.MaxIDLength)
	}
	if by.CausationID == "" {
		by.CausationID = string(cmd.ExecutionID)
	}
	_, events, err := h.execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.RenewLease(cmd, now)
	}, holderLease(cmd.ExecutionID))
	if err != nil {
		return domain.LeaseRenewed{}, err
	}
	return events[0].(domain.LeaseRenewed), nil
}

// RecordOutcome records the executor's result, conditional on its epoch and
// its lease secret. A refusal was recorded (WriteRefused, in the operation's
// evidence stream) before it returns. Like RenewLease, it retries conflicts
// with other state writes while the lease lasts (Config.MaxConflictRetries).
func (h *Handler) RecordOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordOutcome, by Cause) error {
	if by.CausationID == "" {
		by.CausationID = string(cmd.ExecutionID)
	}
	_, _, err := h.execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.RecordOutcome(cmd, now)
	}, holderLease(cmd.ExecutionID))
	return err
}

// RefuseWrite records an executor write an edge refused before it became a
// command, and returns cmd.Refusal once the evidence is recorded (or the
// store's error if it could not be; or the model's refusal when the write
// names no execution of op, which records nothing).
func (h *Handler) RefuseWrite(ctx context.Context, op domain.OperationID, cmd domain.RefuseWrite, by Cause) error {
	if by.CausationID == "" {
		by.CausationID = string(cmd.ExecutionID)
	}
	_, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.RefuseWrite(cmd, now)
	})
	return err
}

// LapseLease moves an execution whose lease expired to Unknown (the sweeper).
func (h *Handler) LapseLease(ctx context.Context, op domain.OperationID, cmd domain.LapseLease, by Cause) (domain.LeaseLapsed, error) {
	_, events, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.LapseLease(cmd, now)
	})
	if err != nil {
		return domain.LeaseLapsed{}, err
	}
	return events[0].(domain.LeaseLapsed), nil
}

// RecordLateOutcome records a stale executor's definite result for its own
// Unknown execution, proven by the secret of the lease it held.
func (h *Handler) RecordLateOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordLateOutcome, by Cause) error {
	if by.CausationID == "" {
		by.CausationID = string(cmd.ExecutionID)
	}
	_, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.RecordLateOutcome(cmd, now)
	})
	return err
}

// Reconcile resolves an Unknown or Escalated execution.
func (h *Handler) Reconcile(ctx context.Context, op domain.OperationID, cmd domain.Reconcile, by Cause) error {
	_, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.Reconcile(cmd, now)
	})
	return err
}

// Escalate hands an Unknown execution to a person.
func (h *Handler) Escalate(ctx context.Context, op domain.OperationID, cmd domain.Escalate, by Cause) error {
	_, _, err := h.Execute(ctx, op, by, func(s *domain.Operation, now time.Time) ([]domain.Event, error) {
		return s.Escalate(cmd, now)
	})
	return err
}
