package httpapi

import (
	"net/http"
	"time"

	"opledger/domain"
	"opledger/projections"
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
	var after *projections.TimeCursor
	if text := r.URL.Query().Get("cursor"); text != "" {
		c, ok := projections.ParseTimeCursor(text, validExecutionID)
		if !ok {
			return reply{}, invalid("cursor", "cursor must be a next_cursor this endpoint answered")
		}
		after = &c
	}
	page, err := s.reads.ListEscalations(r.Context(), after, limit)
	if err != nil {
		return reply{}, readError("escalations", err)
	}
	resp := escalationsResponse{Escalations: make([]escalationView, 0, len(page.Escalations))}
	if page.Next != nil {
		resp.NextCursor = page.Next.String()
	}
	ops := make([]string, 0, len(page.Escalations))
	execs := make([]string, 0, len(page.Escalations))
	at := make(map[string]int, len(page.Escalations))
	for i, e := range page.Escalations {
		v := escalationView{ExecutionID: e.ID, OperationID: e.OperationID, Attempt: e.Attempt, LeaseEpoch: e.LeaseEpoch,
			IdempotencyKey: e.IdempotencyKey, WorkerID: e.WorkerID, StartedAt: e.StartedAt, UnknownSince: e.UnknownSince,
			UnknownCause: e.UnknownCause, EscalationReason: e.EscalationReason, EscalationDetail: e.EscalationDetail,
			AmountMinor: e.AmountMinor, Currency: e.Currency, OrderID: e.OrderID, CorrelationID: e.CorrelationID,
			Evidence: []evidenceView{}}
		if e.EscalatedAt != nil {
			v.EscalatedAt = *e.EscalatedAt
		}
		resp.Escalations = append(resp.Escalations, v)
		ops, execs, at[e.ID] = append(ops, e.OperationID), append(execs, e.ID), i
	}
	evs, err := s.reads.EvidenceOfExecutions(r.Context(), ops, execs, maxEvidencePerEscalation)
	if err != nil {
		return reply{}, readError("escalation evidence", err)
	}
	for _, ev := range evs {
		if ev.ExecutionID == nil {
			continue
		}
		if i, found := at[*ev.ExecutionID]; found {
			resp.Escalations[i].Evidence = append(resp.Escalations[i].Evidence, newEvidenceView(ev))
		}
	}
	return ok(resp), nil
}

func validExecutionID(id string) bool {
	_, err := domain.ParseExecutionID(id)
	return err == nil
}
