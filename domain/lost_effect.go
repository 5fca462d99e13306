package domain

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TypeLostEffectEscalated is the stable type name of LostEffectEscalated.
const TypeLostEffectEscalated = "LostEffectEscalated"

// ReasonEffectLost names why a lost effect's execution is escalated (its
// escalation reason, and the evidence's reason in the unattributed stream).
const ReasonEffectLost Reason = "effect.lost"

// Where a lost effect was found (LostEffectEscalated.Source).
const (
	// LostEffectByWorker: a worker held the executor's answer for an
	// execution the store no longer knew.
	LostEffectByWorker = "worker"
	// LostEffectByLookup: the lost-effect check asked the executor (by our
	// reference, or by key) after a log regression.
	LostEffectByLookup = "executor-lookup"
	// LostEffectByExport: the lost-effect check read the executor's
	// export (as audit provider-diff reads it).
	LostEffectByExport = "executor-export"
)

// LostEffectEscalated hands to a person an effect the executor made, or
// may have made (Outcome Completed or Unknown), that no execution of the
// ledger accounts for: the store lost the execution it was made for (a
// failover that lost acknowledged writes). In the operation's stream it
// opens execution ExecutionID, Escalated, with the effect's key and
// reference: it blocks a new execution as an Escalated one does (a second
// refund past the provider's key retention is the harm it prevents) until
// a person resolves it (Reconciled, method operator). When the operation
// itself is gone it is evidence in the unattributed evidence stream, with
// no execution.
type LostEffectEscalated struct {
	OperationID OperationID `json:"operation_id"`
	// ExecutionID is the execution it opens, Escalated (empty in the
	// unattributed stream).
	ExecutionID ExecutionID `json:"execution_id,omitempty"`
	// LostExecutionID is the execution the effect was made for, as the
	// worker that holds its answer knew it; empty when a lookup found it.
	LostExecutionID ExecutionID `json:"lost_execution_id,omitempty"`
	// Attempt is the attempt the key names, when it names one.
	Attempt           int            `json:"attempt,omitempty"`
	IdempotencyKey    IdempotencyKey `json:"idempotency_key"`
	ProviderReference string         `json:"provider_reference,omitempty"`
	// Outcome is what the executor's answer amounts to: Completed (the
	// effect was made) or Unknown (it may have been).
	Outcome     Outcome `json:"outcome"`
	AmountMinor int64   `json:"amount_minor,omitempty"`
	Currency    string  `json:"currency,omitempty"`
	ExportID    string  `json:"export_id,omitempty"`
	// Source says where it was found: LostEffectByWorker, ...ByLookup,
	// ...ByExport.
	Source  string    `json:"source"`
	Detail  string    `json:"detail,omitempty"`
	FoundAt time.Time `json:"found_at"`
}

func (LostEffectEscalated) EventType() string { return TypeLostEffectEscalated }

// EscalateLostEffect is the command: an effect found at the executor,
// which the ledger may not account for. Its texts come from the executor:
// they are kept escaped (EvidenceText), never refused.
type EscalateLostEffect struct {
	LostExecutionID   ExecutionID
	IdempotencyKey    IdempotencyKey
	ProviderReference string
	Outcome           Outcome
	AmountMinor       int64
	Currency          string
	ExportID          string
	Source            string
	Detail            string
}

// EscalateLostEffect decides on an effect found at the executor. It
// refuses with operation.unknown when the operation does not exist (the
// caller records the evidence in the unattributed stream: see
// LostEffectEvidence); it decides nothing (no event, no error) when an
// execution accounts for the effect already — one under its key that is
// still open (the executor or the reconciler will settle it with this very
// effect), one that recorded its reference, or a lost effect escalated
// before — or when the answer says nothing was made (NotApplied). Else it
// escalates: a LostEffectEscalated opening the next execution, Escalated.
func (o *Operation) EscalateLostEffect(cmd EscalateLostEffect, now time.Time) ([]Event, error) {
	if !o.Exists() {
		return nil, refuse(ReasonOperationUnknown, "no such operation")
	}
	if !cmd.Outcome.Valid() {
		return nil, refuseField("outcome", "outcome must be Completed, NotApplied or Unknown, got %q", clip(string(cmd.Outcome)))
	}
	if cmd.Outcome == NotApplied || o.Accounts(cmd.IdempotencyKey, cmd.ProviderReference) {
		return nil, nil
	}
	ev := LostEffectEvidence(o.ID, cmd, now)
	ev.ExecutionID = ExecutionID(ChildID(PrefixExecution, o.ID, len(o.Executions)+1))
	// The execution opened is the latest: its attempt is at least the
	// latest one's, so that a new decision after a person resolved it
	// NotApplied is for a new attempt, with a new key.
	if d, ok := o.LatestDecision(); ok {
		ev.Attempt = max(ev.Attempt, d.Attempt)
	}
	if cur := o.CurrentExecution(); cur != nil {
		ev.Attempt = max(ev.Attempt, cur.Attempt)
	}
	return []Event{ev}, nil
}

// Accounts reports whether an execution of o accounts for the effect made
// under key with reference ref (either may be empty when not known): one
// that recorded ref, or one under key that is still open (Executing,
// Unknown, Escalated: its executor or the reconciler will find this
// effect), or one under key that completed without a reference.
func (o *Operation) Accounts(key IdempotencyKey, ref string) bool {
	for _, x := range o.Executions {
		switch {
		case ref != "" && x.ProviderReference == ref:
			return true
		case key != "" && x.IdempotencyKey == key && (x.State.Open() || x.State == ExecCompleted && x.ProviderReference == ""):
			return true
		}
	}
	return false
}

// LostEffectEvidence is the LostEffectEscalated recording cmd for
// operation op without opening an execution: the unattributed evidence of
// an effect whose operation the store no longer holds.
func LostEffectEvidence(op OperationID, cmd EscalateLostEffect, now time.Time) LostEffectEscalated {
	ev := LostEffectEscalated{
		OperationID: op, LostExecutionID: cmd.LostExecutionID, Attempt: attemptOfKey(op, cmd.IdempotencyKey),
		IdempotencyKey: cmd.IdempotencyKey, Outcome: cmd.Outcome, AmountMinor: cmd.AmountMinor, Source: cmd.Source, FoundAt: now,
	}
	key, _ := EvidenceText(string(cmd.IdempotencyKey), MaxIDLength)
	ev.IdempotencyKey = IdempotencyKey(key)
	lost, _ := EvidenceText(string(cmd.LostExecutionID), MaxIDLength)
	ev.LostExecutionID = ExecutionID(lost)
	ev.ProviderReference, _ = EvidenceText(cmd.ProviderReference, MaxProviderReferenceLength)
	ev.Currency, _ = EvidenceText(cmd.Currency, MaxIDLength)
	ev.ExportID, _ = EvidenceText(cmd.ExportID, MaxIDLength)
	ev.Source, _ = EvidenceText(cmd.Source, MaxIDLength)
	ev.Detail, _ = EvidenceText(cmd.Detail, MaxTextLength)
	return ev
}

// attemptOfKey reads the attempt a key of op derives from
// (refund-OP-…-a2, export-OP-…-a2-u1), 0 when it names none.
func attemptOfKey(op OperationID, key IdempotencyKey) int {
	i := strings.Index(string(key), string(op)+"-a")
	if i < 0 {
		return 0
	}
	rest := string(key)[i+len(op)+2:]
	if j := strings.IndexByte(rest, '-'); j >= 0 {
		rest = rest[:j]
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// openLostEffect is Evolve's case: the execution a lost effect opens.
func (o *Operation) openLostEffect(ev LostEffectEscalated) error {
	o.UpdatedAt = ev.FoundAt
	if ev.ExecutionID == "" {
		return fmt.Errorf("evolve: a lost effect of %s in its stream opens no execution", ev.OperationID)
	}
	if o.Execution(ev.ExecutionID) != nil {
		return fmt.Errorf("evolve: execution %s opened twice", ev.ExecutionID)
	}
	o.addExecution(&Execution{
		ID: ev.ExecutionID, Attempt: ev.Attempt, Use: 1, State: ExecEscalated, IdempotencyKey: ev.IdempotencyKey,
		ProviderReference: ev.ProviderReference, StartedAt: ev.FoundAt,
	})
	return nil
}
