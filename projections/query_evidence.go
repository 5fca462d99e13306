package projections

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Evidence is one row of the evidence table: a refused presentation, a
// duplicate delivery, a refused write, or a summary of refusals past the
// evidence bound (Count of them; every other row counts one).
type Evidence struct {
	Seq                int64 // order in the log, 1-based: the keyset
	EventID            string
	StreamID           string
	Kind               string // PresentationRejected | DeliveryDuplicated | WriteRefused | RefusalsSummarized
	Reason             string
	Status             *string // the ClaimStatus; nil for WriteRefused
	OperationID        *string // nil when the evidence names no operation
	MessageID          *string
	CapabilityID       *string
	ExecutionID        *string
	ExecutionState     *string
	Worker             *string
	ExecutionAttempted *bool // nil for WriteRefused
	ReplaySuspected    bool
	Detail             *string
	Command            *string // WriteRefused: the refused command
	LeaseEpoch         *int64
	CurrentEpoch       *int64
	Outcome            *string
	ProviderReference  *string
	RecordedAt         time.Time // the ledger's clock
	// Count is how many refusals the row stands for.
	Count int64
	// Actor is who caused it (the principal: a token's name), where Worker
	// is the worker label the caller gave.
	Actor *string
	// Summary is a RefusalsSummarized's JSON (window, bounds, reasons,
	// principals, samples), nil on other rows.
	Summary []byte
}

const evidenceQueryColumns = `event_seq, event_id, stream_id, kind, reason, status, operation_id, message_id, capability_id, execution_id,
       execution_state, worker, execution_attempted, replay_suspected, detail, command, lease_epoch, current_epoch, outcome,
       provider_reference, recorded_at, count, actor, summary`

func scanEvidence(row pgx.CollectableRow) (Evidence, error) {
	var v Evidence
	err := row.Scan(&v.Seq, &v.EventID, &v.StreamID, &v.Kind, &v.Reason, &v.Status, &v.OperationID, &v.MessageID, &v.CapabilityID,
		&v.ExecutionID, &v.ExecutionState, &v.Worker, &v.ExecutionAttempted, &v.ReplaySuspected, &v.Detail, &v.Command,
		&v.LeaseEpoch, &v.CurrentEpoch, &v.Outcome, &v.ProviderReference, &v.RecordedAt, &v.Count, &v.Actor, &v.Summary)
	v.RecordedAt = v.RecordedAt.UTC()
	return v, err
}

// Evidence kinds, as Evidence.Kind and EvidenceQuery.Kind.
const (
	EvidencePresentationRejected = "PresentationRejected"
	EvidenceDeliveryDuplicated   = "DeliveryDuplicated"
	EvidenceWriteRefused         = "WriteRefused"
	EvidenceRefusalsSummarized   = "RefusalsSummarized"
)

// EvidenceQuery filters and pages ListEvidence. Zero fields do not filter.
type EvidenceQuery struct {
	Kind        string
	Reason      string
	OperationID string
	// Since keeps evidence the ledger recorded at or after it.
	Since time.Time
	// ReplayOnly keeps evidence of a suspected replay.
	ReplayOnly bool
	// NewestFirst lists in reverse log order (default: log order).
	NewestFirst bool
	// After continues a listing: the Next of the previous page (a Seq).
	After int64
	// Limit bounds the page (default DefaultQueryLimit, at most
	// MaxQueryLimit).
	Limit int
}

// EvidencePage is one page of ListEvidence.
type EvidencePage struct {
	Evidence []Evidence
	// Next, when not 0, is the After of the next page (there may be more).
	Next int64
}

// ListEvidence lists evidence in the order the log recorded it (or the
// reverse), filtered by q, one keyset page at a time.
func (r *Reads) ListEvidence(ctx context.Context, q EvidenceQuery) (EvidencePage, error) {
	limit := clampQueryLimit(q.Limit)
	var w where
	if q.Kind != "" {
		w.add("kind = " + w.arg(q.Kind))
	}
	if q.Reason != "" {
		w.add("reason = " + w.arg(q.Reason))
	}
	if q.OperationID != "" {
		w.add("operation_id = " + w.arg(q.OperationID))
	}
	if !q.Since.IsZero() {
		w.add("recorded_at >= " + w.arg(q.Since))
	}
	if q.ReplayOnly {
		w.add("replay_suspected")
	}
	order := "event_seq"
	if q.NewestFirst {
		order = "event_seq DESC"
		if q.After > 0 {
			w.add("event_seq < " + w.arg(q.After))
		}
	} else if q.After > 0 {
		w.add("event_seq > " + w.arg(q.After))
	}
	stmt := `SELECT ` + evidenceQueryColumns + ` FROM %[1]s.evidence` + w.clause() + ` ORDER BY ` + order + ` LIMIT ` + w.arg(limit+1)
	rows, err := r.db.Query(ctx, r.sql(stmt), w.args...)
	if err != nil {
		return EvidencePage{}, fmt.Errorf("list evidence: %w", err)
	}
	items, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return EvidencePage{}, fmt.Errorf("list evidence: %w", err)
	}
	page := EvidencePage{Evidence: items}
	if len(items) > limit {
		page.Evidence = items[:limit]
		page.Next = items[limit-1].Seq
	}
	return page, nil
}

// EvidenceOfExecutions returns the newest evidence naming each of the
// executions (of the given operations), at most perExecution each, in log
// order: one query through evidence_operation_id_idx.
func (r *Reads) EvidenceOfExecutions(ctx context.Context, ops, execs []string, perExecution int) ([]Evidence, error) {
	if len(execs) == 0 {
		return nil, nil
	}
	rows, err := r.db.Query(ctx, r.sql(`SELECT `+evidenceQueryColumns+` FROM (
    SELECT ev.*, row_number() OVER (PARTITION BY ev.execution_id ORDER BY ev.event_seq DESC) AS rn
    FROM %[1]s.evidence ev WHERE ev.operation_id = ANY($1) AND ev.execution_id = ANY($2)
) x WHERE rn <= $3 ORDER BY event_seq`), ops, execs, clampQueryLimit(perExecution))
	if err != nil {
		return nil, fmt.Errorf("read evidence of executions: %w", err)
	}
	evs, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return nil, fmt.Errorf("read evidence of executions: %w", err)
	}
	return evs, nil
}
