package projections

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"opledger/domain"
)

// ErrCorruptLog means an event cannot be folded: it does not decode, or it
// cannot follow what the projection holds (an execution event for an
// execution never claimed, a capability issued twice). It is a bug or
// tampering, and an item failure, never an outage: the projector retries
// the event a bounded number of times, then sets it aside and skips it,
// recording the skip in skipped_events and on its operation's row (see
// skip.go). It is never skipped silently.
var ErrCorruptLog = errors.New("projections: event cannot be folded")

// errNotFolded marks the fold's default branch: an event type it has no
// case for (Folds reports which types have one).
var errNotFolded = errors.New("no case in the read models' fold")

// Values of executions.outcome_source.
const (
	sourceExecutor       = "executor"
	sourceLateOutcome    = "late-outcome"
	sourceReconciliation = "reconciliation"
)

// batchModel is the part of the read models one batch touches: the rows of
// every operation (and delivery) the batch names, loaded before folding, and
// the append-only rows the batch produces. Folding is pure; the batch writes
// the rows it created or changed back afterwards.
//
// fold checks everything an event needs before it changes anything, so an
// event it refuses leaves the model as it was and can be skipped in place.
type batchModel struct {
	ops      map[string]*operationRow
	execs    map[string]*executionRow
	caps     map[string]*capabilityRow
	capsOf   map[string][]*capabilityRow // caps by operation
	dels     map[deliveryKey]*deliveryRow
	evidence []*evidenceRow
	recons   []*reconciliationRow
	skipped  []*skippedRow
	// incomplete holds the operations with a skipped event (loaded, or
	// skipped in this batch).
	incomplete map[string]bool
}

func newBatchModel() *batchModel {
	return &batchModel{
		ops:        map[string]*operationRow{},
		execs:      map[string]*executionRow{},
		caps:       map[string]*capabilityRow{},
		capsOf:     map[string][]*capabilityRow{},
		dels:       map[deliveryKey]*deliveryRow{},
		incomplete: map[string]bool{},
	}
}

// fold applies one event to the model.
func (m *batchModel) fold(d decodedEvent) error {
	switch {
	case d.event == nil:
		return nil
	case d.evidence:
		if lost, ok := d.event.(domain.LostEffectEscalated); ok && d.op == "" {
			m.evidence = append(m.evidence, lostEffectEvidence(d, lost)) // its operation is gone
			return nil
		}
		if !domain.IsEvidence(d.event) {
			return corrupt(d, "an evidence stream holds evidence only")
		}
		return m.foldEvidence(d)
	default:
		return m.foldOperation(d)
	}
}

// foldEvidence folds a refused presentation, a duplicate delivery, a
// refused write or a summary of refusals past the bound — of an
// operation's evidence stream, of an unattributed one (presentations that
// named an operation that does not exist), or of an operation's stream
// written before evidence streams existed — into evidence rows and the
// deliveries they count. It touches no operation's row: evidence changes
// nothing an operation is.
func (m *batchModel) foldEvidence(d decodedEvent) error {
	switch ev := d.event.(type) {
	case domain.DeliveryDuplicated:
		m.presented(d, string(ev.MessageID), d.op, string(domain.StatusDuplicateDelivery), string(domain.ReasonDeliveryDuplicate), string(ev.CapabilityID), ev.SeenAt)
		f := false
		m.evidence = append(m.evidence, &evidenceRow{
			EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
			Kind: d.rec.Type, RecordedAt: ev.SeenAt, StoredAt: d.rec.RecordedAt, OperationID: d.op,
			MessageID: string(ev.MessageID), CapabilityID: string(ev.CapabilityID), ExecutionID: string(ev.ExecutionID),
			ExecutionState: string(ev.ExecutionState), Worker: ev.WorkerID, Status: string(domain.StatusDuplicateDelivery),
			Reason: string(domain.ReasonDeliveryDuplicate), ExecutionAttempted: &f, Count: 1, Actor: d.actor,
		})
	case domain.PresentationRejected:
		opID := cmp.Or(string(ev.OperationID), d.op)
		m.presented(d, string(ev.MessageID), opID, string(ev.Status), string(ev.Reason), string(ev.CapabilityID), ev.RejectedAt)
		m.evidence = append(m.evidence, rejectedEvidence(d, ev, opID))
	case domain.WriteRefused:
		epoch, current := ev.LeaseEpoch, ev.CurrentEpoch
		m.evidence = append(m.evidence, &evidenceRow{
			EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
			Kind: d.rec.Type, RecordedAt: ev.RefusedAt, StoredAt: d.rec.RecordedAt, OperationID: d.op,
			ExecutionID: string(ev.ExecutionID), Worker: ev.WorkerID, Reason: string(ev.Reason), Detail: ev.Detail,
			Command: ev.Command, LeaseEpoch: &epoch, CurrentEpoch: &current, Outcome: string(ev.Outcome),
			ProviderReference: ev.ProviderReference, Count: 1, Actor: d.actor,
		})
	case domain.RefusalsSummarized:
		row, err := summaryEvidence(d, ev)
		if err != nil {
			return err
		}
		m.evidence = append(m.evidence, row)
	default:
		return fmt.Errorf("%w: %w", errNotFolded, corrupt(d, "event type %T is not evidence", d.event))
	}
	return nil
}

// summaryEvidence is the evidence row of a summary: it counts ev.Count
// refusals; its reason is the summary's first.
func summaryEvidence(d decodedEvent, ev domain.RefusalsSummarized) (*evidenceRow, error) {
	if ev.Count < 1 || len(ev.Reasons) == 0 {
		return nil, corrupt(d, "a summary counts %d refusals over %d reasons: at least one of each", ev.Count, len(ev.Reasons))
	}
	summary, err := json.Marshal(ev)
	if err != nil {
		return nil, corrupt(d, "summary: %v", err)
	}
	row := &evidenceRow{
		EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
		Kind: d.rec.Type, RecordedAt: ev.SummarizedAt, StoredAt: d.rec.RecordedAt, OperationID: cmp.Or(string(ev.OperationID), d.op),
		Reason: string(ev.Reasons[0].Reason), Count: ev.Count, Actor: d.actor, Summary: summary,
	}
	switch ev.Scope {
	case domain.ScopeCapability:
		row.CapabilityID = ev.ScopeID
	case domain.ScopeExecution, domain.ScopeHolder:
		row.ExecutionID = ev.ScopeID
	}
	return row, nil
}

// foldOperation folds an event of an operation stream. The operation row's
// last_event_seq guards every row the event touches: they are written in
// the same transaction.
func (m *batchModel) foldOperation(d decodedEvent) error {
	o := m.ops[d.op]
	if o != nil && o.LastEventSeq >= d.seq {
		return nil // folded already
	}
	if req, ok := d.event.(domain.OperationRequested); ok {
		if o != nil {
			return corrupt(d, "operation %s requested twice", d.op)
		}
		o = &operationRow{
			ID: d.op, Kind: string(kindOrRefund(req.Kind)), ExportID: req.ExportID,
			OrderID: req.OrderID, AmountMinor: req.AmountMinor, Currency: req.Currency,
			OrderTotalMinor: req.OrderTotalMinor, CorrelationID: string(req.CorrelationID), RequestedBy: req.RequestedBy,
			CreatedAt: req.RequestedAt, UpdatedAt: req.RequestedAt, ProjectionIncomplete: m.incomplete[d.op], change: created,
		}
		m.ops[d.op] = o
	} else if o == nil {
		return corrupt(d, "%s before OperationRequested", d.rec.Type)
	} else if err := m.foldOperationEvent(d, o); err != nil {
		return err
	}
	o.State = operationState(o, m.execs[o.CurrentExecutionID])
	o.Version, o.LastEventSeq = d.rec.Version, d.seq
	touch(&o.change)
	return nil
}

func (m *batchModel) foldOperationEvent(d decodedEvent, o *operationRow) error {
	switch ev := d.event.(type) {
	case domain.Decided:
		o.DecisionID, o.Verdict, o.Attempt, o.UpdatedAt = string(ev.DecisionID), string(ev.Verdict), int32(ev.Attempt), ev.DecidedAt
		o.UsesLeft = 0 // a new decision supersedes the uses of the one before
		m.supersede(d, ev.DecisionID)
	case domain.CapabilityIssued:
		if m.caps[string(ev.CapabilityID)] != nil {
			return corrupt(d, "capability %s issued twice", ev.CapabilityID)
		}
		uses := int32(max(ev.Uses, 1))
		m.addCapability(&capabilityRow{
			ID: string(ev.CapabilityID), OperationID: d.op, DecisionID: string(ev.DecisionID), Attempt: int32(ev.Attempt),
			State: string(domain.CapIssued), IssuedAt: ev.IssuedAt, ExpiresAt: ev.ExpiresAt, Uses: uses, UsesLeft: uses,
			LastEventSeq: d.seq, change: created,
		})
		if string(ev.DecisionID) == o.DecisionID {
			o.UsesLeft += uses
		}
		o.UpdatedAt = ev.IssuedAt
	case domain.CapabilityRevoked:
		c, err := m.capability(d, ev.CapabilityID)
		if err != nil {
			return err
		}
		if c.DecisionID == o.DecisionID {
			o.UsesLeft = max(o.UsesLeft-c.UsesLeft, 0)
		}
		c.UsesLeft = 0
		c.State, c.RevokedAt, c.RevokeReason, c.RevokedBy = string(domain.CapRevoked), ev.RevokedAt, ev.Reason, cmp.Or(ev.RevokedBy, d.actor)
		c.LastEventSeq = d.seq
		touch(&c.change)
		o.UpdatedAt = ev.RevokedAt
	case domain.Claimed:
		return m.foldClaimed(d, o, ev)
	case domain.LostEffectEscalated:
		return m.foldLostEffect(d, o, ev)
	case domain.DeliveryDuplicated, domain.PresentationRejected, domain.WriteRefused, domain.RefusalsSummarized:
		// Evidence in an operation's stream (written before evidence
		// streams existed): folded as any evidence.
		return m.foldEvidence(d)
	default:
		return m.foldExecutionEvent(d, o)
	}
	return nil
}

// capSuperseded is the state of a capability whose decision a later one
// superseded: the ledger refuses it (capability.superseded), so it has no
// use left. The events never name it; the read models derive it.
const capSuperseded = "Superseded"

// addCapability puts c in the model, and among its operation's.
func (m *batchModel) addCapability(c *capabilityRow) {
	m.caps[c.ID] = c
	m.capsOf[c.OperationID] = append(m.capsOf[c.OperationID], c)
}

// supersede marks every Issued capability of d's operation under another
// decision than decision Superseded (the operation's rows are all loaded).
func (m *batchModel) supersede(d decodedEvent, decision domain.DecisionID) {
	for _, c := range m.capsOf[d.op] {
		if c.State == string(domain.CapIssued) && c.DecisionID != string(decision) {
			c.State, c.UsesLeft, c.LastEventSeq = capSuperseded, 0, d.seq
			touch(&c.change)
		}
	}
}

func (m *batchModel) foldClaimed(d decodedEvent, o *operationRow, ev domain.Claimed) error {
	c, err := m.capability(d, ev.CapabilityID)
	if err != nil {
		return err
	}
	if c.State == string(domain.CapConsumed) {
		return corrupt(d, "capability %s consumed beyond its %d uses", ev.CapabilityID, c.Uses)
	}
	if m.execs[string(ev.ExecutionID)] != nil {
		return corrupt(d, "execution %s claimed twice", ev.ExecutionID)
	}
	c.UsesClaimed++
	if c.State == string(domain.CapIssued) {
		if c.DecisionID == o.DecisionID && c.UsesLeft > 0 {
			o.UsesLeft = max(o.UsesLeft-1, 0)
		}
		c.UsesLeft = max(c.Uses-c.UsesClaimed, 0)
	}
	if c.UsesClaimed >= c.Uses || c.State != string(domain.CapIssued) {
		c.State, c.UsesLeft = string(domain.CapConsumed), 0
	}
	c.ConsumedByMessageID, c.ConsumedAt, c.ExecutionID = string(ev.MessageID), ev.ClaimedAt, string(ev.ExecutionID)
	c.LastEventSeq = d.seq
	touch(&c.change)
	m.execs[string(ev.ExecutionID)] = &executionRow{
		ID: string(ev.ExecutionID), OperationID: d.op, CapabilityID: string(ev.CapabilityID), MessageID: string(ev.MessageID),
		WorkerID: ev.WorkerID, Attempt: int32(ev.Attempt), Use: int32(max(ev.Use, 1)), State: string(domain.ExecExecuting), LeaseEpoch: ev.LeaseEpoch,
		LeaseExpiresAt: ev.LeaseExpiresAt, IdempotencyKey: string(ev.IdempotencyKey), StartedAt: ev.ClaimedAt,
		LastEventSeq: d.seq, change: created,
	}
	o.CurrentExecutionID, o.UpdatedAt = string(ev.ExecutionID), ev.ClaimedAt
	o.ExecutionCount++
	m.presented(d, string(ev.MessageID), d.op, string(domain.StatusClaimed), "", string(ev.CapabilityID), ev.ClaimedAt)
	return nil
}

// foldExecutionEvent folds the events that move one execution.
func (m *batchModel) foldExecutionEvent(d decodedEvent, o *operationRow) error {
	var id domain.ExecutionID
	switch ev := d.event.(type) {
	case domain.LeaseRenewed:
		id = ev.ExecutionID
	case domain.OutcomeRecorded:
		id = ev.ExecutionID
	case domain.OutcomeUnknown:
		id = ev.ExecutionID
	case domain.LeaseLapsed:
		id = ev.ExecutionID
	case domain.LateOutcomeRecorded:
		id = ev.ExecutionID
	case domain.Reconciled:
		id = ev.ExecutionID
	case domain.Escalated:
		id = ev.ExecutionID
	case domain.LogRegressed, domain.LogRegressionAcknowledged:
		return corrupt(d, "%s belongs in %s, never in an operation's stream", d.rec.Type, domain.RegressionStream)
	default:
		return fmt.Errorf("%w: %w", errNotFolded, corrupt(d, "event type %T is not folded by the read models", d.event))
	}
	x := m.execs[string(id)]
	if x == nil || x.OperationID != d.op {
		return corrupt(d, "%s for execution %s, not claimed on operation %s", d.rec.Type, id, d.op)
	}
	x.LastEventSeq = d.seq
	touch(&x.change)
	switch ev := d.event.(type) {
	case domain.LeaseRenewed:
		x.LeaseExpiresAt = ev.LeaseExpiresAt
	case domain.OutcomeRecorded:
		x.State, x.Outcome, x.OutcomeSource = string(ev.Outcome), string(ev.Outcome), sourceExecutor
		x.ProviderReference, x.EndedAt, o.UpdatedAt = ev.ProviderReference, ev.RecordedAt, ev.RecordedAt
	case domain.OutcomeUnknown:
		x.State, x.UnknownSince, x.UnknownCause, o.UpdatedAt = string(domain.ExecUnknown), ev.RecordedAt, ev.Cause, ev.RecordedAt
	case domain.LeaseLapsed:
		x.State, x.LeaseEpoch, x.UnknownSince, o.UpdatedAt = string(domain.ExecUnknown), ev.ToEpoch, ev.LapsedAt, ev.LapsedAt
		x.UnknownCause = fmt.Sprintf("lease lapsed: epoch %d -> %d", ev.FromEpoch, ev.ToEpoch)
	case domain.LateOutcomeRecorded:
		x.State, x.Outcome, x.OutcomeSource = string(ev.Outcome), string(ev.Outcome), sourceLateOutcome
		x.ProviderReference, x.EndedAt, o.UpdatedAt = ev.ProviderReference, ev.RecordedAt, ev.RecordedAt
		m.recons = append(m.recons, &reconciliationRow{
			EventID: d.rec.ID, EventSeq: d.seq, Kind: d.rec.Type, ExecutionID: x.ID, OperationID: d.op,
			Outcome: string(ev.Outcome), ProviderReference: ev.ProviderReference, Actor: d.actor, Detail: ev.Detail, At: ev.RecordedAt,
		})
	case domain.Reconciled:
		x.State, x.Outcome, x.OutcomeSource = string(ev.Outcome), string(ev.Outcome), sourceReconciliation
		x.ProviderReference, x.EndedAt, o.UpdatedAt = ev.ProviderReference, ev.ReconciledAt, ev.ReconciledAt
		m.recons = append(m.recons, &reconciliationRow{
			EventID: d.rec.ID, EventSeq: d.seq, Kind: d.rec.Type, ExecutionID: x.ID, OperationID: d.op,
			Outcome: string(ev.Outcome), Method: string(ev.Method), ProviderReference: ev.ProviderReference,
			Actor: cmp.Or(ev.Actor, d.actor), Evidence: ev.Evidence, At: ev.ReconciledAt,
		})
	case domain.Escalated:
		x.State, x.EscalatedAt, x.EscalationReason, x.EscalationDetail = string(domain.ExecEscalated), ev.EscalatedAt, ev.Reason, ev.Detail
		o.UpdatedAt = ev.EscalatedAt
		m.recons = append(m.recons, &reconciliationRow{
			EventID: d.rec.ID, EventSeq: d.seq, Kind: d.rec.Type, ExecutionID: x.ID, OperationID: d.op,
			Actor: d.actor, Reason: ev.Reason, Detail: ev.Detail, At: ev.EscalatedAt,
		})
	}
	return nil
}

func (m *batchModel) capability(d decodedEvent, id domain.CapabilityID) (*capabilityRow, error) {
	c := m.caps[string(id)]
	if c == nil || c.OperationID != d.op {
		return nil, corrupt(d, "capability %s was not issued on operation %s", id, d.op)
	}
	return c, nil
}

// presented counts a presentation of message msg to operation op. The first
// presentation fixes the delivery's result; later ones count. A presentation
// without a message or operation id (none is recorded so) counts nowhere.
func (m *batchModel) presented(d decodedEvent, msg, op, result, reason, capability string, t time.Time) {
	if msg == "" || op == "" {
		return
	}
	k := deliveryKey{MessageID: msg, OperationID: op}
	r := m.dels[k]
	if r != nil && r.LastEventSeq >= d.seq {
		return // folded already
	}
	if r == nil {
		r = &deliveryRow{deliveryKey: k, FirstSeenAt: t, Result: result, Reason: reason, CapabilityID: capability, change: created}
		m.dels[k] = r
	}
	r.TimesSeen++
	r.LastSeenAt, r.LastEventSeq = t, d.seq
	touch(&r.change)
}

func rejectedEvidence(d decodedEvent, ev domain.PresentationRejected, opID string) *evidenceRow {
	attempted := ev.ExecutionAttempted
	return &evidenceRow{
		EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
		Kind: d.rec.Type, RecordedAt: ev.RejectedAt, StoredAt: d.rec.RecordedAt, OperationID: opID,
		MessageID: string(ev.MessageID), CapabilityID: string(ev.CapabilityID), ExecutionID: string(ev.ExecutionID),
		Worker: ev.WorkerID, Status: string(ev.Status), Reason: string(ev.Reason), ExecutionAttempted: &attempted,
		ReplaySuspected: ev.ReplaySuspected, Detail: ev.Detail, Count: 1, Actor: d.actor,
	}
}

// operationState summarises an operation as domain.Operation.Status does,
// from its latest decision and its current execution. Invariant 3 makes that
// enough: an execution opens only when every earlier one is NotApplied, so
// the one execution that can block (or be Completed) is the current one.
// For a kind of bounded use, at most one execution is open at a time, so
// the one that can be open is the current one too; once it ended, the
// operation is Authorized while the latest decision has uses left.
func operationState(o *operationRow, cur *executionRow) string {
	if p, _ := domain.PolicyOf(domain.OperationKind(o.Kind)); p.Repeats {
		switch {
		case cur != nil && domain.ExecutionState(cur.State).Open():
			return cur.State
		case o.Verdict == "":
			return string(domain.OpRequested)
		case o.Verdict == string(domain.Denied):
			return string(domain.OpDenied)
		case o.UsesLeft == 0 && cur != nil && cur.Attempt >= o.Attempt:
			return cur.State // Completed or NotApplied: the last use's
		default:
			return string(domain.OpAuthorized)
		}
	}
	switch {
	case cur != nil && cur.State != string(domain.ExecNotApplied):
		return cur.State // Executing, Unknown, Escalated or Completed
	case o.Verdict == "":
		return string(domain.OpRequested)
	case o.Verdict == string(domain.Denied):
		return string(domain.OpDenied)
	case cur != nil && cur.Attempt >= o.Attempt:
		return string(domain.OpNotApplied)
	default:
		return string(domain.OpAuthorized)
	}
}

// kindOrRefund is the kind an event states ("": a refund, as before kinds).
func kindOrRefund(k domain.OperationKind) domain.OperationKind {
	if k == "" {
		return domain.KindRefund
	}
	return k
}

// changedRows returns the rows folding created and those it updated, each
// ordered by key (a stable write order).
func changedRows[K comparable, R any](rows map[K]R, change func(R) rowChange, compare func(a, b K) int) (fresh, updates []R) {
	keys := make([]K, 0, len(rows))
	for k, r := range rows {
		if change(r) != unchanged {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, compare)
	for _, k := range keys {
		if r := rows[k]; change(r) == created {
			fresh = append(fresh, r)
		} else {
			updates = append(updates, r)
		}
	}
	return fresh, updates
}

func compareDeliveryKeys(a, b deliveryKey) int {
	return cmp.Or(cmp.Compare(a.MessageID, b.MessageID), cmp.Compare(a.OperationID, b.OperationID))
}

// foldLostEffect opens the Escalated execution a lost effect records: the
// escalations read model lists it for a person, with the effect's key and
// reference; it needs no capability (the claim it was made under is what
// the store lost).
func (m *batchModel) foldLostEffect(d decodedEvent, o *operationRow, ev domain.LostEffectEscalated) error {
	if ev.ExecutionID == "" {
		return corrupt(d, "a lost effect in an operation's stream opens no execution")
	}
	if m.execs[string(ev.ExecutionID)] != nil {
		return corrupt(d, "execution %s opened twice", ev.ExecutionID)
	}
	detail := lostEffectDetail(ev)
	m.execs[string(ev.ExecutionID)] = &executionRow{
		ID: string(ev.ExecutionID), OperationID: d.op, Attempt: int32(ev.Attempt), Use: 1, State: string(domain.ExecEscalated),
		LeaseExpiresAt: ev.FoundAt, IdempotencyKey: string(ev.IdempotencyKey), ProviderReference: ev.ProviderReference,
		StartedAt: ev.FoundAt, UnknownSince: ev.FoundAt, UnknownCause: detail, EscalatedAt: ev.FoundAt,
		EscalationReason: string(domain.ReasonEffectLost), EscalationDetail: detail, LastEventSeq: d.seq, change: created,
	}
	o.CurrentExecutionID, o.UpdatedAt = string(ev.ExecutionID), ev.FoundAt
	o.ExecutionCount++
	m.recons = append(m.recons, &reconciliationRow{
		EventID: d.rec.ID, EventSeq: d.seq, Kind: d.rec.Type, ExecutionID: string(ev.ExecutionID), OperationID: d.op,
		ProviderReference: ev.ProviderReference, Actor: d.actor, Reason: string(domain.ReasonEffectLost), Detail: detail, At: ev.FoundAt,
	})
	return nil
}

// lostEffectEvidence is the evidence row of a lost effect whose operation
// the store no longer holds.
func lostEffectEvidence(d decodedEvent, ev domain.LostEffectEscalated) *evidenceRow {
	return &evidenceRow{
		EventID: d.rec.ID, EventSeq: d.seq, Position: d.rec.Position.String(), StreamID: d.rec.StreamID,
		Kind: d.rec.Type, RecordedAt: ev.FoundAt, StoredAt: d.rec.RecordedAt, OperationID: string(ev.OperationID),
		ExecutionID: string(ev.LostExecutionID), Reason: string(domain.ReasonEffectLost), Detail: lostEffectDetail(ev),
		Outcome: string(ev.Outcome), ProviderReference: ev.ProviderReference, Count: 1, Actor: d.actor,
	}
}

// lostEffectDetail says what a person must decide on, in one line.
func lostEffectDetail(ev domain.LostEffectEscalated) string {
	s := fmt.Sprintf("the executor holds an effect (%s) under key %s that no execution the store holds accounts for (found by %s", ev.Outcome, ev.IdempotencyKey, ev.Source)
	if ev.LostExecutionID != "" {
		s += ", made for execution " + string(ev.LostExecutionID)
	}
	s += ")"
	if ev.Detail != "" {
		s += ": " + ev.Detail
	}
	return s
}
