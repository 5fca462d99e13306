package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"opledger/domain"
	"opledger/projections"
)

// evidenceView is one row of the evidence read model: a refused
// presentation, a duplicate delivery, a refused write, or a summary of the
// refusals past the evidence bound (count of them; every other row counts
// one). actor is the principal that caused it (a token's name); worker the
// worker label the caller gave.
type evidenceView struct {
	Kind               string    `json:"kind"`
	Reason             string    `json:"reason"`
	Status             *string   `json:"status,omitempty"`
	OperationID        *string   `json:"operation_id"`
	MessageID          *string   `json:"message_id"`
	CapabilityID       *string   `json:"capability_id"`
	ExecutionID        *string   `json:"execution_id,omitempty"`
	Worker             *string   `json:"worker,omitempty"`
	ExecutionAttempted *bool     `json:"execution_attempted"`
	ReplaySuspected    bool      `json:"replay_suspected"`
	Detail             *string   `json:"detail,omitempty"`
	Command            *string   `json:"command,omitempty"`
	LeaseEpoch         *int64    `json:"lease_epoch,omitempty"`
	CurrentEpoch       *int64    `json:"current_epoch,omitempty"`
	Outcome            *string   `json:"outcome,omitempty"`
	ProviderReference  *string   `json:"provider_reference,omitempty"`
	RecordedAt         time.Time `json:"recorded_at"`
	Count              int64     `json:"count"`
	Actor              *string   `json:"actor"`
	// Summary is the RefusalsSummarized as recorded (window, bounds,
	// reasons, principals, samples), on a summary's row only.
	Summary json.RawMessage `json:"summary,omitempty"`
}

func newEvidenceView(v projections.Evidence) evidenceView {
	return evidenceView{Kind: v.Kind, Reason: v.Reason, Status: v.Status, OperationID: v.OperationID, MessageID: v.MessageID,
		CapabilityID: v.CapabilityID, ExecutionID: v.ExecutionID, Worker: v.Worker, ExecutionAttempted: v.ExecutionAttempted,
		ReplaySuspected: v.ReplaySuspected, Detail: v.Detail, Command: v.Command, LeaseEpoch: v.LeaseEpoch,
		CurrentEpoch: v.CurrentEpoch, Outcome: v.Outcome, ProviderReference: v.ProviderReference, RecordedAt: v.RecordedAt,
		Count: v.Count, Actor: v.Actor, Summary: v.Summary}
}

type evidenceResponse struct {
	Evidence []evidenceView `json:"evidence"`
	// NextCursor, when present, continues the listing (?cursor=).
	NextCursor string `json:"next_cursor,omitempty"`
}

// listEvidence: GET /v1/evidence?reason=&operation_id=&since=&limit=&cursor=,
// from the read models, in the order the log recorded it. since is an RFC
// 3339 time compared with the ledger's recorded_at; cursor is the
// next_cursor of the previous page.
func (s *Server) listEvidence(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	q := r.URL.Query()
	limit, err := pageLimit(r)
	if err != nil {
		return reply{}, err
	}
	query := projections.EvidenceQuery{Limit: limit}
	if reason := q.Get("reason"); reason != "" {
		if len(reason) > domain.MaxIDLength {
			return reply{}, invalid("reason", "reason is longer than %d bytes", domain.MaxIDLength)
		}
		query.Reason = reason
	}
	if text := q.Get("operation_id"); text != "" {
		op, err := domain.ParseOperationID(text)
		if err != nil {
			return reply{}, invalid("operation_id", "operation_id: %v", err)
		}
		query.OperationID = string(op)
	}
	if text := q.Get("since"); text != "" {
		since, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return reply{}, invalid("since", "since must be an RFC 3339 time like 2026-11-26T14:00:00Z")
		}
		query.Since = since
	}
	if text := q.Get("cursor"); text != "" {
		after, err := strconv.ParseInt(text, 10, 64)
		if err != nil || after < 0 {
			return reply{}, invalid("cursor", "cursor must be a next_cursor this endpoint answered")
		}
		query.After = after
	}
	page, err := s.reads.ListEvidence(r.Context(), query)
	if err != nil {
		return reply{}, readError("evidence", err)
	}
	resp := evidenceResponse{Evidence: evidenceViews(page.Evidence)}
	if page.Next != 0 {
		resp.NextCursor = strconv.FormatInt(page.Next, 10)
	}
	return ok(resp), nil
}

func evidenceViews(evs []projections.Evidence) []evidenceView {
	out := make([]evidenceView, 0, len(evs))
	for _, ev := range evs {
		out = append(out, newEvidenceView(ev))
	}
	return out
}
