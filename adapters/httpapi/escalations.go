package httpapi

import (
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
)

const (
	escalationsSQL = `SELECT e.id, e.operation_id, e.attempt, e.lease_epoch, e.idempotency_key, e.worker_id, e.started_at,
       e.unknown_since, e.unknown_cause, e.escalated_at, e.escalation_reason, e.escalation_detail,
       o.amount_minor, o.currency, o.order_id, o.correlation_id
FROM %[1]s.executions e JOIN %[1]s.operations o ON o.id = e.operation_id
WHERE e.state = 'Escalated' AND ($1::timestamptz IS NULL OR (e.escalated_at, e.id) > ($1::timestamptz, $2::text))
ORDER BY e.escalated_at, e.id LIMIT $3`
	// escalationEvidenceSQL lists the newest evidence of each execution
	// (through evidence_operation_id_idx), at most $3 per execution.
	escalationEvidenceSQL = `SELECT ` + evidenceColumns + ` FROM (
    SELECT ev.*, row_number() OVER (PARTITION BY ev.execution_id ORDER BY ev.event_seq DESC) AS rn
    FROM %[1]s.evidence ev WHERE ev.operation_id = ANY($1) AND ev.execution_id = ANY($2)
) x WHERE rn <= $3 ORDER BY event_seq`
)

type escalationView struct {
	ExecutionID      string         `json:"execution_id"`
	OperationID      string         `json:"operation_id"`
	Attempt          int            `json:"attempt"`
	LeaseEpoch       int64          `json:"lease_epoch"`
	IdempotencyKey   string         `json:"idempotency_key"`
	WorkerID         *string        `json:"worker_id"`
	StartedAt        time.Time      `json:"started_at"`
	UnknownSince     *time.Time     `json:"unknown_since"`
	UnknownCause     *string        `json:"unknown_cause"`
	EscalatedAt      time.Time      `json:"escalated_at"`
	EscalationReason *string        `json:"escalation_reason"`
	EscalationDetail *string        `json:"escalation_detail"`
	AmountMinor      int64          `json:"amount_minor"`
	Currency         string         `json:"currency"`
	OrderID          string         `json:"order_id"`
	CorrelationID    string         `json:"correlation_id"`
	Evidence         []evidenceView `json:"evidence"`
}

type escalationsResponse struct {
	Escalations []escalationView `json:"escalations"`
	NextCursor  string           `json:"next_cursor,omitempty"`
}

// listEscalations: GET /v1/escalations?limit=&cursor=, a person's work
// queue from the read models: Escalated executions, oldest escalation first,
// each with why it became Unknown, why it was escalated, the operation's
// amount and order, and the newest evidence naming it (refused writes,
// duplicate deliveries; at most maxEvidencePerEscalation).
func (s *Server) listEscalations(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	limit, err := pageLimit(r)
	if err != nil {
		return reply{}, err
	}
	var (
		afterAt *time.Time
		afterID string
	)
	if text := r.URL.Query().Get("cursor"); text != "" {
		at, id, ok := parseEscalationCursor(text)
		if !ok {
			return reply{}, invalid("cursor", "cursor must be a next_cursor this endpoint answered")
		}
		afterAt, afterID = &at, id
	}
	m := s.reads
	rows, err := m.db.Query(r.Context(), m.sql(escalationsSQL), afterAt, afterID, limit+1)
	if err != nil {
		return reply{}, readError("escalations", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (escalationView, error) {
		var v escalationView
		err := row.Scan(&v.ExecutionID, &v.OperationID, &v.Attempt, &v.LeaseEpoch, &v.IdempotencyKey, &v.WorkerID, &v.StartedAt,
			&v.UnknownSince, &v.UnknownCause, &v.EscalatedAt, &v.EscalationReason, &v.EscalationDetail,
			&v.AmountMinor, &v.Currency, &v.OrderID, &v.CorrelationID)
		v.StartedAt, v.EscalatedAt, v.UnknownSince = v.StartedAt.UTC(), v.EscalatedAt.UTC(), utc(v.UnknownSince)
		v.Evidence = []evidenceView{}
		return v, err
	})
	if err != nil {
		return reply{}, readError("escalations", err)
	}
	resp := escalationsResponse{Escalations: items}
	if len(items) > limit {
		resp.Escalations = items[:limit]
		last := items[limit-1]
		resp.NextCursor = escalationCursor(last.EscalatedAt, last.ExecutionID)
	}
	if err := s.attachEvidence(r, resp.Escalations); err != nil {
		return reply{}, err
	}
	if resp.Escalations == nil {
		resp.Escalations = []escalationView{}
	}
	return ok(resp), nil
}

// attachEvidence fills each escalation's evidence with one query.
func (s *Server) attachEvidence(r *http.Request, items []escalationView) error {
	if len(items) == 0 {
		return nil
	}
	ops := make([]string, 0, len(items))
	execs := make([]string, 0, len(items))
	at := make(map[string]int, len(items))
	for i, it := range items {
		ops, execs, at[it.ExecutionID] = append(ops, it.OperationID), append(execs, it.ExecutionID), i
	}
	m := s.reads
	rows, err := m.db.Query(r.Context(), m.sql(escalationEvidenceSQL), ops, execs, maxEvidencePerEscalation)
	if err != nil {
		return readError("escalation evidence", err)
	}
	evs, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return readError("escalation evidence", err)
	}
	for _, ev := range evs {
		if ev.ExecutionID == nil {
			continue
		}
		if i, found := at[*ev.ExecutionID]; found {
			items[i].Evidence = append(items[i].Evidence, ev)
		}
	}
	return nil
}

// escalationCursor encodes a keyset position: the escalation time and id.
func escalationCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id))
}

func parseEscalationCursor(text string) (time.Time, string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return time.Time{}, "", false
	}
	ts, id, found := strings.Cut(string(raw), "|")
	at, err := time.Parse(time.RFC3339Nano, ts)
	if !found || err != nil {
		return time.Time{}, "", false
	}
	if _, err := domain.ParseExecutionID(id); err != nil {
		return time.Time{}, "", false
	}
	return at, id, true
}
