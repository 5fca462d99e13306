package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
)

// evidenceColumns are read into evidenceView, in its field order.
const evidenceColumns = `event_seq, kind, reason, status, operation_id, message_id, capability_id, execution_id, worker,
       execution_attempted, replay_suspected, detail, command, lease_epoch, current_epoch, outcome, provider_reference,
       recorded_at`

// evidenceView is one row of the evidence read model: a refused
// presentation, a duplicate delivery or a refused write.
type evidenceView struct {
	Seq                int64     `json:"-"`
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
}

func scanEvidence(row pgx.CollectableRow) (evidenceView, error) {
	var v evidenceView
	err := row.Scan(&v.Seq, &v.Kind, &v.Reason, &v.Status, &v.OperationID, &v.MessageID, &v.CapabilityID, &v.ExecutionID,
		&v.Worker, &v.ExecutionAttempted, &v.ReplaySuspected, &v.Detail, &v.Command, &v.LeaseEpoch, &v.CurrentEpoch,
		&v.Outcome, &v.ProviderReference, &v.RecordedAt)
	v.RecordedAt = v.RecordedAt.UTC()
	return v, err
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
	var (
		where []string
		args  []any
	)
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if reason := q.Get("reason"); reason != "" {
		if len(reason) > domain.MaxIDLength {
			return reply{}, invalid("reason", "reason is longer than %d bytes", domain.MaxIDLength)
		}
		where = append(where, "reason = "+arg(reason))
	}
	if text := q.Get("operation_id"); text != "" {
		op, err := domain.ParseOperationID(text)
		if err != nil {
			return reply{}, invalid("operation_id", "operation_id: %v", err)
		}
		where = append(where, "operation_id = "+arg(string(op)))
	}
	if text := q.Get("since"); text != "" {
		since, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return reply{}, invalid("since", "since must be an RFC 3339 time like 2026-11-26T14:00:00Z")
		}
		where = append(where, "recorded_at >= "+arg(since))
	}
	if text := q.Get("cursor"); text != "" {
		after, err := strconv.ParseInt(text, 10, 64)
		if err != nil || after < 0 {
			return reply{}, invalid("cursor", "cursor must be a next_cursor this endpoint answered")
		}
		where = append(where, "event_seq > "+arg(after))
	}
	stmt := `SELECT ` + evidenceColumns + ` FROM %[1]s.evidence`
	if len(where) > 0 {
		stmt += ` WHERE ` + strings.Join(where, " AND ")
	}
	stmt += ` ORDER BY event_seq LIMIT ` + arg(limit+1)
	rows, err := s.reads.db.Query(r.Context(), s.reads.sql(stmt), args...)
	if err != nil {
		return reply{}, readError("evidence", err)
	}
	items, err := pgx.CollectRows(rows, scanEvidence)
	if err != nil {
		return reply{}, readError("evidence", err)
	}
	resp := evidenceResponse{Evidence: items}
	if len(items) > limit {
		resp.Evidence = items[:limit]
		resp.NextCursor = fmt.Sprint(items[limit-1].Seq)
	}
	if resp.Evidence == nil {
		resp.Evidence = []evidenceView{}
	}
	return ok(resp), nil
}
