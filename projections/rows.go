package projections

import (
	"encoding/json"
	"time"
)

// The row types define the tables of the migrations (migrations/*.sql, see
// columns.go); their JSON names are the column names, so a batch loads rows
// with jsonb_agg and writes them with jsonb_populate_recordset, one
// statement per table. An omitted (empty or zero) nullable value is NULL in
// the table.
//
// last_event_seq is the 1-based ordinal, in the log as this projection reads
// it, of the last event folded into the row; folding skips an event whose
// ordinal is not beyond it, which makes every handler idempotent.

// rowChange says what folding did to a row, and so how the batch writes it.
type rowChange uint8

const (
	unchanged rowChange = iota // loaded and not folded into: not written
	updated                    // loaded and changed: upserted
	created                    // made by folding: inserted, and must not exist yet
)

// touch marks a row changed by folding.
func touch(c *rowChange) {
	if *c == unchanged {
		*c = updated
	}
}

type operationRow struct {
	ID string `json:"id"`
	// OrderID, AmountMinor and Currency are a refund's; NULL for another
	// kind (004).
	OrderID            string    `json:"order_id,omitempty"`
	AmountMinor        int64     `json:"amount_minor,omitempty"`
	Currency           string    `json:"currency,omitempty"`
	OrderTotalMinor    int64     `json:"order_total_minor,omitempty"` // 0: not known when requested
	CorrelationID      string    `json:"correlation_id"`
	RequestedBy        string    `json:"requested_by,omitempty"`
	State              string    `json:"state"`
	Attempt            int32     `json:"attempt"`
	DecisionID         string    `json:"decision_id,omitempty"`
	Verdict            string    `json:"verdict,omitempty"`
	CurrentExecutionID string    `json:"current_execution_id,omitempty"`
	ExecutionCount     int32     `json:"execution_count"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
	Version            int64     `json:"version"`
	LastEventSeq       int64     `json:"last_event_seq"`
	// ProjectionIncomplete: an event of the operation was skipped (002).
	ProjectionIncomplete bool `json:"projection_incomplete"`
	// Kind, ExportID and UsesLeft (004): the operation's kind, an export
	// download's export, the uses left under the latest decision.
	Kind     string `json:"kind"`
	ExportID string `json:"export_id,omitempty"`
	UsesLeft int32  `json:"uses_left"`
	change   rowChange
}

type executionRow struct {
	ID                string    `json:"id"`
	OperationID       string    `json:"operation_id"`
	CapabilityID      string    `json:"capability_id"`
	MessageID         string    `json:"message_id"`
	WorkerID          string    `json:"worker_id,omitempty"`
	Attempt           int32     `json:"attempt"`
	State             string    `json:"state"`
	LeaseEpoch        int64     `json:"lease_epoch"`
	LeaseExpiresAt    time.Time `json:"lease_expires_at"`
	IdempotencyKey    string    `json:"idempotency_key"`
	Outcome           string    `json:"outcome,omitempty"`
	OutcomeSource     string    `json:"outcome_source,omitempty"`
	ProviderReference string    `json:"provider_reference,omitempty"`
	StartedAt         time.Time `json:"started_at"`
	EndedAt           time.Time `json:"ended_at,omitzero"`
	UnknownSince      time.Time `json:"unknown_since,omitzero"`
	UnknownCause      string    `json:"unknown_cause,omitempty"`
	EscalatedAt       time.Time `json:"escalated_at,omitzero"`
	EscalationReason  string    `json:"escalation_reason,omitempty"`
	EscalationDetail  string    `json:"escalation_detail,omitempty"`
	LastEventSeq      int64     `json:"last_event_seq"`
	// Use is which use of its capability the execution is (004).
	Use    int32 `json:"use"`
	change rowChange
}

type capabilityRow struct {
	ID                  string    `json:"id"`
	OperationID         string    `json:"operation_id"`
	DecisionID          string    `json:"decision_id"`
	Attempt             int32     `json:"attempt"`
	State               string    `json:"state"`
	IssuedAt            time.Time `json:"issued_at"`
	ExpiresAt           time.Time `json:"expires_at"`
	ConsumedByMessageID string    `json:"consumed_by_message_id,omitempty"`
	ConsumedAt          time.Time `json:"consumed_at,omitzero"`
	ExecutionID         string    `json:"execution_id,omitempty"`
	RevokedAt           time.Time `json:"revoked_at,omitzero"`
	RevokeReason        string    `json:"revoke_reason,omitempty"`
	RevokedBy           string    `json:"revoked_by,omitempty"`
	LastEventSeq        int64     `json:"last_event_seq"`
	// Uses, UsesClaimed and UsesLeft count the capability's uses (004).
	Uses        int32 `json:"uses"`
	UsesClaimed int32 `json:"uses_claimed"`
	UsesLeft    int32 `json:"uses_left"`
	change      rowChange
}

type deliveryKey struct {
	MessageID   string `json:"message_id"`
	OperationID string `json:"operation_id"`
}

type deliveryRow struct {
	deliveryKey
	FirstSeenAt  time.Time `json:"first_seen_at"`
	LastSeenAt   time.Time `json:"last_seen_at"`
	TimesSeen    int64     `json:"times_seen"`
	Result       string    `json:"result"`
	Reason       string    `json:"reason,omitempty"`
	CapabilityID string    `json:"capability_id,omitempty"`
	LastEventSeq int64     `json:"last_event_seq"`
	change       rowChange
}

// evidenceRow and reconciliationRow are append-only: one per event, keyed by
// event id.

type evidenceRow struct {
	EventID            string    `json:"event_id"`
	EventSeq           int64     `json:"event_seq"`
	Position           string    `json:"position"`
	StreamID           string    `json:"stream_id"`
	Kind               string    `json:"kind"`
	RecordedAt         time.Time `json:"recorded_at"`
	StoredAt           time.Time `json:"stored_at"`
	OperationID        string    `json:"operation_id,omitempty"`
	MessageID          string    `json:"message_id,omitempty"`
	CapabilityID       string    `json:"capability_id,omitempty"`
	ExecutionID        string    `json:"execution_id,omitempty"`
	ExecutionState     string    `json:"execution_state,omitempty"`
	Worker             string    `json:"worker,omitempty"`
	Status             string    `json:"status,omitempty"`
	Reason             string    `json:"reason"`
	ExecutionAttempted *bool     `json:"execution_attempted,omitempty"` // nil: not applicable (WriteRefused)
	ReplaySuspected    bool      `json:"replay_suspected"`
	Detail             string    `json:"detail,omitempty"`
	Command            string    `json:"command,omitempty"`
	LeaseEpoch         *int64    `json:"lease_epoch,omitempty"`
	CurrentEpoch       *int64    `json:"current_epoch,omitempty"`
	Outcome            string    `json:"outcome,omitempty"`
	ProviderReference  string    `json:"provider_reference,omitempty"`
	// Count is how many refusals the row stands for: 1, or a summary's count.
	Count int64 `json:"count"`
	// Actor is the event's actor: who caused it (a token's name).
	Actor string `json:"actor,omitempty"`
	// Summary is a RefusalsSummarized as the event states it.
	Summary json.RawMessage `json:"summary,omitempty"`
}

// skippedRow is one event the projector read past without folding it
// (append-only, keyed by event id).
type skippedRow struct {
	EventID     string    `json:"event_id"`
	EventSeq    int64     `json:"event_seq"`
	Position    string    `json:"position"`
	StreamID    string    `json:"stream_id"`
	EventType   string    `json:"event_type"`
	OperationID string    `json:"operation_id,omitempty"`
	Reason      string    `json:"reason"`
	Detail      string    `json:"detail,omitempty"`
	SkippedAt   time.Time `json:"skipped_at"`
}

type reconciliationRow struct {
	EventID           string    `json:"event_id"`
	EventSeq          int64     `json:"event_seq"`
	Kind              string    `json:"kind"`
	ExecutionID       string    `json:"execution_id"`
	OperationID       string    `json:"operation_id"`
	Outcome           string    `json:"outcome,omitempty"`
	Method            string    `json:"method,omitempty"`
	ProviderReference string    `json:"provider_reference,omitempty"`
	Actor             string    `json:"actor,omitempty"`
	Evidence          string    `json:"evidence,omitempty"`
	Reason            string    `json:"reason,omitempty"`
	Detail            string    `json:"detail,omitempty"`
	At                time.Time `json:"at"`
}

// Postgres keeps microseconds. The normalize methods truncate every time of
// a row to the microsecond before it is written, so a value reads back as it
// was written whichever way it is written (COPY, or JSON text that the
// server would round) and a row folded in one batch equals the same row
// folded across many.

func us(t *time.Time) { *t = t.Truncate(time.Microsecond) }

func (r *operationRow) normalize() { us(&r.CreatedAt); us(&r.UpdatedAt) }

func (r *executionRow) normalize() {
	for _, t := range []*time.Time{&r.LeaseExpiresAt, &r.StartedAt, &r.EndedAt, &r.UnknownSince, &r.EscalatedAt} {
		us(t)
	}
}

func (r *capabilityRow) normalize() {
	for _, t := range []*time.Time{&r.IssuedAt, &r.ExpiresAt, &r.ConsumedAt, &r.RevokedAt} {
		us(t)
	}
}

func (r *deliveryRow) normalize()       { us(&r.FirstSeenAt); us(&r.LastSeenAt) }
func (r *evidenceRow) normalize()       { us(&r.RecordedAt); us(&r.StoredAt) }
func (r *reconciliationRow) normalize() { us(&r.At) }
func (r *skippedRow) normalize()        { us(&r.SkippedAt) }

// The copyValues methods give a created row's values in the order of its
// table's copy columns (statements.go), for COPY, each of a Go type
// copybinary.go encodes.

func (r *operationRow) copyValues() []any {
	return []any{r.ID, nullText(r.OrderID), nullInt(r.AmountMinor), nullText(r.Currency), nullInt(r.OrderTotalMinor), r.CorrelationID,
		nullText(r.RequestedBy), r.State, r.Attempt, nullText(r.DecisionID), nullText(r.Verdict),
		nullText(r.CurrentExecutionID), r.ExecutionCount, r.CreatedAt, r.UpdatedAt, r.Version, r.LastEventSeq,
		r.ProjectionIncomplete, r.Kind, nullText(r.ExportID), r.UsesLeft}
}

func (r *executionRow) copyValues() []any {
	return []any{r.ID, r.OperationID, r.CapabilityID, r.MessageID, nullText(r.WorkerID), r.Attempt, r.State,
		r.LeaseEpoch, r.LeaseExpiresAt, r.IdempotencyKey, nullText(r.Outcome), nullText(r.OutcomeSource),
		nullText(r.ProviderReference), r.StartedAt, nullTime(r.EndedAt), nullTime(r.UnknownSince),
		nullText(r.UnknownCause), nullTime(r.EscalatedAt), nullText(r.EscalationReason),
		nullText(r.EscalationDetail), r.LastEventSeq, r.Use}
}

func (r *capabilityRow) copyValues() []any {
	return []any{r.ID, r.OperationID, r.DecisionID, r.Attempt, r.State, r.IssuedAt, r.ExpiresAt,
		nullText(r.ConsumedByMessageID), nullTime(r.ConsumedAt), nullText(r.ExecutionID), nullTime(r.RevokedAt),
		nullText(r.RevokeReason), nullText(r.RevokedBy), r.LastEventSeq, r.Uses, r.UsesClaimed, r.UsesLeft}
}

// The append-only rows' values mirror their JSON: a member left out when
// empty (omitempty) is NULL, as jsonb_populate_recordset makes it.

func (r *evidenceRow) copyValues() []any {
	return []any{r.EventID, r.EventSeq, r.Position, r.StreamID, r.Kind, r.RecordedAt, r.StoredAt,
		nullText(r.OperationID), nullText(r.MessageID), nullText(r.CapabilityID), nullText(r.ExecutionID),
		nullText(r.ExecutionState), nullText(r.Worker), nullText(r.Status), r.Reason,
		r.ExecutionAttempted, r.ReplaySuspected, nullText(r.Detail), nullText(r.Command), r.LeaseEpoch, r.CurrentEpoch,
		nullText(r.Outcome), nullText(r.ProviderReference), r.Count, nullText(r.Actor), nullJSON(r.Summary)}
}

// nullJSON is raw JSON for a jsonb column, or NULL when empty.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}

func (r *reconciliationRow) copyValues() []any {
	return []any{r.EventID, r.EventSeq, r.Kind, r.ExecutionID, r.OperationID, nullText(r.Outcome), nullText(r.Method),
		nullText(r.ProviderReference), nullText(r.Actor), nullText(r.Evidence), nullText(r.Reason), nullText(r.Detail), r.At}
}

func (r *deliveryRow) copyValues() []any {
	return []any{r.MessageID, r.OperationID, r.FirstSeenAt, r.LastSeenAt, r.TimesSeen, r.Result,
		nullText(r.Reason), nullText(r.CapabilityID), r.LastEventSeq}
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
