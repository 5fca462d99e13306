package projections

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Escalation is one Escalated execution with what a person needs to settle
// it: why it became Unknown, why it was escalated, and its operation's
// kind, amount, order and correlation (an export download's export
// instead of amount and order, which are then zero).
type Escalation struct {
	Execution
	AmountMinor   int64
	Currency      string
	OrderID       string
	CorrelationID string
	Kind          string
	ExportID      *string
}

// EscalationPage is one page of ListEscalations.
type EscalationPage struct {
	Escalations []Escalation
	// Next, when set, is the after of the next page (there may be more).
	Next *TimeCursor
}

// ListEscalations lists the Escalated executions, oldest escalation first
// (then by execution id), strictly after the cursor, at most limit: a
// person's work queue, through executions_escalated_at_idx.
func (r *Reads) ListEscalations(ctx context.Context, after *TimeCursor, limit int) (EscalationPage, error) {
	limit = clampQueryLimit(limit)
	var w where
	w.add("e.state = 'Escalated'")
	if after != nil {
		w.add("(e.escalated_at, e.id) > (" + w.arg(after.At) + "::timestamptz, " + w.arg(after.ID) + "::text)")
	}
	stmt := `SELECT ` + executionQueryColumns + `, coalesce(o.amount_minor, 0), coalesce(o.currency, ''), coalesce(o.order_id, ''), o.correlation_id, o.kind, o.export_id
FROM %[1]s.executions e JOIN %[1]s.operations o ON o.id = e.operation_id` + w.clause() +
		` ORDER BY e.escalated_at, e.id LIMIT ` + w.arg(limit+1)
	rows, err := r.db.Query(ctx, r.sql(stmt), w.args...)
	if err != nil {
		return EscalationPage{}, fmt.Errorf("list escalations: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Escalation, error) {
		var e Escalation
		x, err := scanExecution(row, &e.AmountMinor, &e.Currency, &e.OrderID, &e.CorrelationID, &e.Kind, &e.ExportID)
		e.Execution = x
		return e, err
	})
	if err != nil {
		return EscalationPage{}, fmt.Errorf("list escalations: %w", err)
	}
	page := EscalationPage{Escalations: items}
	if len(items) > limit {
		page.Escalations = items[:limit]
		last := items[limit-1]
		if last.EscalatedAt != nil {
			page.Next = &TimeCursor{At: *last.EscalatedAt, ID: last.ID}
		}
	}
	return page, nil
}
