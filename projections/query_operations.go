package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxExecutionsListed bounds the executions, capabilities, deliveries and
// reconciliations read with one operation (each execution needs a
// NotApplied before it, so real operations have a handful).
const MaxExecutionsListed = 1000

// Operation is one row of the operations table (docs/projections.md).
type Operation struct {
	ID                 string
	State              string // Requested Denied Authorized Executing Unknown Escalated Completed NotApplied
	Attempt            int
	AmountMinor        int64
	Currency           string
	OrderID            string
	CorrelationID      string
	OrderTotalMinor    *int64
	RequestedBy        *string
	DecisionID         *string
	Verdict            *string
	CurrentExecutionID *string
	ExecutionCount     int
	CreatedAt          time.Time
	UpdatedAt          time.Time
	Version            int64
	// ProjectionIncomplete: the projector skipped an event of this
	// operation (it could not be decoded or folded); read the events.
	ProjectionIncomplete bool
	// Kind is the operation's kind (refund, export-download); AmountMinor,
	// Currency and OrderID are a refund's (zero for another kind), ExportID
	// an export download's. UsesLeft counts the uses left under the latest
	// decision (expiry not judged).
	Kind     string
	ExportID *string
	UsesLeft int
}

const operationQueryColumns = `o.id, o.state, o.attempt, coalesce(o.amount_minor, 0), coalesce(o.currency, ''), coalesce(o.order_id, ''),
       o.correlation_id, o.order_total_minor, o.requested_by, o.decision_id, o.verdict, o.current_execution_id, o.execution_count,
       o.created_at, o.updated_at, o.version, o.projection_incomplete, o.kind, o.export_id, o.uses_left`

func scanOperation(row pgx.Row) (Operation, error) {
	var o Operation
	err := row.Scan(&o.ID, &o.State, &o.Attempt, &o.AmountMinor, &o.Currency, &o.OrderID, &o.CorrelationID, &o.OrderTotalMinor,
		&o.RequestedBy, &o.DecisionID, &o.Verdict, &o.CurrentExecutionID, &o.ExecutionCount, &o.CreatedAt, &o.UpdatedAt,
		&o.Version, &o.ProjectionIncomplete, &o.Kind, &o.ExportID, &o.UsesLeft)
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return o, err
}

// Operation returns operation id; found is false until the projection has
// folded its first event.
func (r *Reads) Operation(ctx context.Context, id string) (op Operation, found bool, err error) {
	op, err = scanOperation(r.db.QueryRow(ctx, r.sql(`SELECT `+operationQueryColumns+` FROM %[1]s.operations o WHERE o.id = $1`), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, false, nil
	}
	if err != nil {
		return Operation{}, false, fmt.Errorf("read operation %s: %w", id, err)
	}
	return op, true, nil
}

// OperationQuery filters and pages ListOperations. Zero fields do not
// filter.
type OperationQuery struct {
	// States keeps operations in any of these states.
	States []string
	// CreatedAfter and CreatedBefore bound the creation time (the ledger's
	// clock): "younger than an hour" is CreatedAfter = now - 1h.
	CreatedAfter, CreatedBefore time.Time
	// ReplaySuspected keeps operations with evidence of a suspected replay.
	ReplaySuspected bool
	// Search keeps the operations that an id names, whatever kind of id it
	// is: the operation's own, its order's, its correlation's, a message
	// presented to it, a capability or an execution of it. Matched exactly.
	Search string
	// After continues a listing: the Next of the previous page.
	After *TimeCursor
	// Limit bounds the page (default DefaultQueryLimit, at most
	// MaxQueryLimit).
	Limit int
}

// OperationPage is one page of ListOperations, newest first.
type OperationPage struct {
	Operations []Operation
	// Next, when set, is the After of the next page (there may be more).
	Next *TimeCursor
}

// ListOperations lists operations newest first (by creation, then id),
// filtered by q, one keyset page at a time.
func (r *Reads) ListOperations(ctx context.Context, q OperationQuery) (OperationPage, error) {
	if len(q.Search) > MaxSearchLength {
		return OperationPage{}, fmt.Errorf("list operations: search term longer than %d bytes", MaxSearchLength)
	}
	limit := clampQueryLimit(q.Limit)
	var w where
	if len(q.States) > 0 {
		w.add("o.state = ANY(" + w.arg(q.States) + ")")
	}
	if !q.CreatedAfter.IsZero() {
		w.add("o.created_at >= " + w.arg(q.CreatedAfter))
	}
	if !q.CreatedBefore.IsZero() {
		w.add("o.created_at < " + w.arg(q.CreatedBefore))
	}
	if q.ReplaySuspected {
		w.add("EXISTS (SELECT 1 FROM %[1]s.evidence ev WHERE ev.operation_id = o.id AND ev.replay_suspected)")
	}
	if q.Search != "" {
		s := w.arg(q.Search)
		// Each arm is an index lookup (primary keys, evidence_message_id_idx,
		// and 003's order and correlation indexes).
		w.add(`o.id IN (SELECT ` + s + `::text
	UNION ALL SELECT id FROM %[1]s.operations WHERE order_id = ` + s + `
	UNION ALL SELECT id FROM %[1]s.operations WHERE correlation_id = ` + s + `
	UNION ALL SELECT operation_id FROM %[1]s.deliveries WHERE message_id = ` + s + `
	UNION ALL SELECT operation_id FROM %[1]s.evidence WHERE message_id = ` + s + ` AND operation_id IS NOT NULL
	UNION ALL SELECT operation_id FROM %[1]s.capabilities WHERE id = ` + s + `
	UNION ALL SELECT operation_id FROM %[1]s.executions WHERE id = ` + s + `)`)
	}
	if q.After != nil {
		w.add("(o.created_at, o.id) < (" + w.arg(q.After.At) + "::timestamptz, " + w.arg(q.After.ID) + "::text)")
	}
	stmt := `SELECT ` + operationQueryColumns + ` FROM %[1]s.operations o` + w.clause() +
		` ORDER BY o.created_at DESC, o.id DESC LIMIT ` + w.arg(limit+1)
	rows, err := r.db.Query(ctx, r.sql(stmt), w.args...)
	if err != nil {
		return OperationPage{}, fmt.Errorf("list operations: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Operation, error) { return scanOperation(row) })
	if err != nil {
		return OperationPage{}, fmt.Errorf("list operations: %w", err)
	}
	page := OperationPage{Operations: ops}
	if len(ops) > limit {
		page.Operations = ops[:limit]
		last := ops[limit-1]
		page.Next = &TimeCursor{At: last.CreatedAt, ID: last.ID}
	}
	return page, nil
}

// Execution is one row of the executions table.
type Execution struct {
	ID                string
	OperationID       string
	CapabilityID      string
	MessageID         string
	WorkerID          *string // the lease owner
	Attempt           int
	State             string // Executing Completed NotApplied Unknown Escalated
	LeaseEpoch        int64
	LeaseExpiresAt    time.Time
	IdempotencyKey    string
	Outcome           *string
	OutcomeSource     *string // executor | late-outcome | reconciliation
	ProviderReference *string
	StartedAt         time.Time
	EndedAt           *time.Time
	UnknownSince      *time.Time
	UnknownCause      *string
	EscalatedAt       *time.Time
	EscalationReason  *string
	EscalationDetail  *string
	// Use is which use of its capability the execution is (1 for a refund).
	Use int
}

const executionQueryColumns = `e.id, e.operation_id, e.capability_id, e.message_id, e.worker_id, e.attempt, e.state, e.lease_epoch,
       e.lease_expires_at, e.idempotency_key, e.outcome, e.outcome_source, e.provider_reference, e.started_at, e.ended_at,
       e.unknown_since, e.unknown_cause, e.escalated_at, e.escalation_reason, e.escalation_detail, e.use`

func scanExecution(row pgx.Row, more ...any) (Execution, error) {
	var x Execution
	dest := append([]any{&x.ID, &x.OperationID, &x.CapabilityID, &x.MessageID, &x.WorkerID, &x.Attempt, &x.State, &x.LeaseEpoch,
		&x.LeaseExpiresAt, &x.IdempotencyKey, &x.Outcome, &x.OutcomeSource, &x.ProviderReference, &x.StartedAt, &x.EndedAt,
		&x.UnknownSince, &x.UnknownCause, &x.EscalatedAt, &x.EscalationReason, &x.EscalationDetail, &x.Use}, more...)
	err := row.Scan(dest...)
	x.LeaseExpiresAt, x.StartedAt = x.LeaseExpiresAt.UTC(), x.StartedAt.UTC()
	x.EndedAt, x.UnknownSince, x.EscalatedAt = utcPtr(x.EndedAt), utcPtr(x.UnknownSince), utcPtr(x.EscalatedAt)
	return x, err
}

// ExecutionsOf lists operation op's executions by attempt, at most
// MaxExecutionsListed.
func (r *Reads) ExecutionsOf(ctx context.Context, op string) ([]Execution, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT `+executionQueryColumns+` FROM %[1]s.executions e WHERE e.operation_id = $1
ORDER BY e.attempt, e.started_at, e.id LIMIT $2`), op, MaxExecutionsListed)
	if err != nil {
		return nil, fmt.Errorf("read executions of %s: %w", op, err)
	}
	xs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Execution, error) { return scanExecution(row) })
	if err != nil {
		return nil, fmt.Errorf("read executions of %s: %w", op, err)
	}
	return xs, nil
}

// Capability is one row of the capabilities table. State is what events
// made it (Issued, Consumed, Revoked, Superseded); StateAt tells Expired
// apart.
type Capability struct {
	ID                  string
	OperationID         string
	DecisionID          string
	Attempt             int
	State               string
	IssuedAt            time.Time
	ExpiresAt           time.Time
	ConsumedByMessageID *string
	ConsumedAt          *time.Time
	ExecutionID         *string
	RevokedAt           *time.Time
	RevokeReason        *string
	RevokedBy           *string
	// Uses is what the capability was issued with, UsesClaimed its
	// claims, UsesLeft what it still allows (0 once consumed or revoked;
	// StateAt judges expiry).
	Uses, UsesClaimed, UsesLeft int
}

// StateAt is the capability's state at now: an Issued capability whose
// expiry is not after now is Expired (a presentation at or after the expiry
// fails). Pass the ledger's clock, not the database's.
func (c Capability) StateAt(now time.Time) string {
	if c.State == "Issued" && !c.ExpiresAt.After(now) {
		return "Expired"
	}
	return c.State
}

// CapabilitiesOf lists operation op's capabilities in the order they were
// issued, at most MaxExecutionsListed.
func (r *Reads) CapabilitiesOf(ctx context.Context, op string) ([]Capability, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT id, operation_id, decision_id, attempt, state, issued_at, expires_at,
       consumed_by_message_id, consumed_at, execution_id, revoked_at, revoke_reason, revoked_by, uses, uses_claimed, uses_left
FROM %[1]s.capabilities WHERE operation_id = $1 ORDER BY issued_at, id LIMIT $2`), op, MaxExecutionsListed)
	if err != nil {
		return nil, fmt.Errorf("read capabilities of %s: %w", op, err)
	}
	cs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Capability, error) {
		var c Capability
		err := row.Scan(&c.ID, &c.OperationID, &c.DecisionID, &c.Attempt, &c.State, &c.IssuedAt, &c.ExpiresAt,
			&c.ConsumedByMessageID, &c.ConsumedAt, &c.ExecutionID, &c.RevokedAt, &c.RevokeReason, &c.RevokedBy, &c.Uses, &c.UsesClaimed, &c.UsesLeft)
		c.IssuedAt, c.ExpiresAt = c.IssuedAt.UTC(), c.ExpiresAt.UTC()
		c.ConsumedAt, c.RevokedAt = utcPtr(c.ConsumedAt), utcPtr(c.RevokedAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read capabilities of %s: %w", op, err)
	}
	return cs, nil
}

// Delivery is one row of the deliveries table: a message presented to an
// operation.
type Delivery struct {
	MessageID    string
	OperationID  string
	FirstSeenAt  time.Time
	LastSeenAt   time.Time
	TimesSeen    int64
	Result       string  // the ClaimStatus of the first presentation
	Reason       *string // its reason; nil when Claimed
	CapabilityID *string
}

// DeliveriesOf lists the messages presented to operation op, first seen
// first, at most MaxExecutionsListed.
func (r *Reads) DeliveriesOf(ctx context.Context, op string) ([]Delivery, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT message_id, operation_id, first_seen_at, last_seen_at, times_seen, result, reason, capability_id
FROM %[1]s.deliveries WHERE operation_id = $1 ORDER BY first_seen_at, message_id LIMIT $2`), op, MaxExecutionsListed)
	if err != nil {
		return nil, fmt.Errorf("read deliveries of %s: %w", op, err)
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := row.Scan(&d.MessageID, &d.OperationID, &d.FirstSeenAt, &d.LastSeenAt, &d.TimesSeen, &d.Result, &d.Reason, &d.CapabilityID)
		d.FirstSeenAt, d.LastSeenAt = d.FirstSeenAt.UTC(), d.LastSeenAt.UTC()
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read deliveries of %s: %w", op, err)
	}
	return ds, nil
}

// DeliveriesShown lists at most limit of the messages presented to
// operation op, those that claimed first, then first seen first, and how
// many there are in all: a page that must stay small however many messages
// hostile callers presented.
func (r *Reads) DeliveriesShown(ctx context.Context, op string, limit int) ([]Delivery, int64, error) {
	limit = min(max(limit, 1), MaxExecutionsListed)
	rows, err := r.db.Query(ctx, r.sql(`SELECT message_id, operation_id, first_seen_at, last_seen_at, times_seen, result, reason, capability_id,
       count(*) OVER ()
FROM %[1]s.deliveries WHERE operation_id = $1 ORDER BY result = 'Claimed' DESC, first_seen_at, message_id LIMIT $2`), op, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("read deliveries of %s: %w", op, err)
	}
	var total int64
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := row.Scan(&d.MessageID, &d.OperationID, &d.FirstSeenAt, &d.LastSeenAt, &d.TimesSeen, &d.Result, &d.Reason, &d.CapabilityID, &total)
		d.FirstSeenAt, d.LastSeenAt = d.FirstSeenAt.UTC(), d.LastSeenAt.UTC()
		return d, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("read deliveries of %s: %w", op, err)
	}
	return ds, total, nil
}

// DuplicatesSummarized returns how many deliveries of operation op were
// duplicates counted into summaries past the evidence bound
// (RefusalsSummarized reasons of type DeliveryDuplicated): the deliveries
// table's times_seen counts only those recorded one by one, and a summary
// counts per key, not per message.
func (r *Reads) DuplicatesSummarized(ctx context.Context, op string) (int64, error) {
	var n int64
	err := r.db.QueryRow(ctx, r.sql(`SELECT coalesce(sum((rc->>'count')::bigint), 0)::bigint
FROM %[1]s.evidence e CROSS JOIN LATERAL jsonb_array_elements(e.summary->'reasons') AS rc
WHERE e.operation_id = $1 AND e.kind = 'RefusalsSummarized' AND rc->>'type' = 'DeliveryDuplicated'`), op).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read summarized duplicates of %s: %w", op, err)
	}
	return n, nil
}

// Reconciliation is one row of the reconciliations table: how an Unknown
// execution was resolved or handed to a person.
type Reconciliation struct {
	EventSeq          int64
	Kind              string // Reconciled | Escalated | LateOutcomeRecorded
	ExecutionID       string
	OperationID       string
	Outcome           *string
	Method            *string // provider-lookup | provider-resend | operator
	ProviderReference *string
	Actor             *string
	Evidence          *string
	Reason            *string
	Detail            *string
	At                time.Time
}

// ReconciliationsOf lists operation op's reconciliations in log order, at
// most MaxExecutionsListed.
func (r *Reads) ReconciliationsOf(ctx context.Context, op string) ([]Reconciliation, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT event_seq, kind, execution_id, operation_id, outcome, method, provider_reference, actor, evidence,
       reason, detail, at
FROM %[1]s.reconciliations WHERE operation_id = $1 ORDER BY event_seq LIMIT $2`), op, MaxExecutionsListed)
	if err != nil {
		return nil, fmt.Errorf("read reconciliations of %s: %w", op, err)
	}
	rs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Reconciliation, error) {
		var c Reconciliation
		err := row.Scan(&c.EventSeq, &c.Kind, &c.ExecutionID, &c.OperationID, &c.Outcome, &c.Method, &c.ProviderReference, &c.Actor,
			&c.Evidence, &c.Reason, &c.Detail, &c.At)
		c.At = c.At.UTC()
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read reconciliations of %s: %w", op, err)
	}
	return rs, nil
}

// SkippedEvent is one row of skipped_events: an event the projector read
// past without folding it.
type SkippedEvent struct {
	EventSeq    int64
	EventID     string
	Position    string
	StreamID    string
	EventType   string
	OperationID *string
	Reason      string
	Detail      *string
	SkippedAt   time.Time
}

// SkippedOf lists the events of operation op the projector skipped, at
// most MaxExecutionsListed.
func (r *Reads) SkippedOf(ctx context.Context, op string) ([]SkippedEvent, error) {
	rows, err := r.db.Query(ctx, r.sql(`SELECT event_seq, event_id, position, stream_id, event_type, operation_id, reason, detail, skipped_at
FROM %[1]s.skipped_events WHERE operation_id = $1 ORDER BY event_seq LIMIT $2`), op, MaxExecutionsListed)
	if err != nil {
		return nil, fmt.Errorf("read skipped events of %s: %w", op, err)
	}
	ss, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SkippedEvent, error) {
		var s SkippedEvent
		err := row.Scan(&s.EventSeq, &s.EventID, &s.Position, &s.StreamID, &s.EventType, &s.OperationID, &s.Reason, &s.Detail, &s.SkippedAt)
		s.SkippedAt = s.SkippedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read skipped events of %s: %w", op, err)
	}
	return ss, nil
}

// maxAttentionCount bounds each count of Attention: past it the count reads
// as "at least" (a partial-index scan stops there).
const maxAttentionCount = 10_000

// Attention counts what needs a person's eye, each from a partial index and
// bounded by maxAttentionCount (Capped says a count stopped there).
type Attention struct {
	UnknownExecutions   int64
	EscalatedExecutions int64
	ReplaySignals       int64
	Capped              bool
}

// Attention counts Unknown and Escalated executions and evidence of a
// suspected replay.
func (r *Reads) Attention(ctx context.Context) (Attention, error) {
	var a Attention
	err := r.db.QueryRow(ctx, r.sql(`SELECT
  (SELECT count(*) FROM (SELECT 1 FROM %[1]s.executions WHERE state = 'Unknown' LIMIT $1) u),
  (SELECT count(*) FROM (SELECT 1 FROM %[1]s.executions WHERE state = 'Escalated' LIMIT $1) e),
  (SELECT count(*) FROM (SELECT 1 FROM %[1]s.evidence WHERE replay_suspected LIMIT $1) r)`), maxAttentionCount).
		Scan(&a.UnknownExecutions, &a.EscalatedExecutions, &a.ReplaySignals)
	if err != nil {
		return Attention{}, fmt.Errorf("read attention counts: %w", err)
	}
	a.Capped = max(a.UnknownExecutions, a.EscalatedExecutions, a.ReplaySignals) >= maxAttentionCount
	return a, nil
}
