package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
)

// maxExecutionsListed bounds the executions shown with one operation (each
// needs a NotApplied before it, so real operations have a handful).
const maxExecutionsListed = 1000

const (
	operationSQL = `SELECT id, state, attempt, amount_minor, currency, order_id, correlation_id,
       order_total_minor, created_at, updated_at, version, projection_incomplete
FROM %[1]s.operations WHERE id = $1`
	executionsOfSQL = `SELECT id, state, attempt, lease_epoch, idempotency_key, outcome, provider_reference, started_at, ended_at
FROM %[1]s.executions WHERE operation_id = $1
ORDER BY attempt, started_at, id LIMIT $2`
)

type operationView struct {
	OperationID     string    `json:"operation_id"`
	State           string    `json:"state"`
	Attempt         int       `json:"attempt"`
	AmountMinor     int64     `json:"amount_minor"`
	Currency        string    `json:"currency"`
	OrderID         string    `json:"order_id"`
	CorrelationID   string    `json:"correlation_id"`
	OrderTotalMinor *int64    `json:"order_total_minor"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	Version         int64     `json:"version"`
	// ProjectionIncomplete: the projector skipped an event of this
	// operation (it could not be decoded or folded); read the events.
	ProjectionIncomplete bool            `json:"projection_incomplete"`
	Executions           []executionView `json:"executions"`
}

type executionView struct {
	ExecutionID       string     `json:"execution_id"`
	State             string     `json:"state"`
	Attempt           int        `json:"attempt"`
	LeaseEpoch        int64      `json:"lease_epoch"`
	IdempotencyKey    string     `json:"idempotency_key"`
	Outcome           *string    `json:"outcome"`
	ProviderReference *string    `json:"provider_reference"`
	StartedAt         time.Time  `json:"started_at"`
	EndedAt           *time.Time `json:"ended_at"`
}

// getOperation: GET /v1/operations/{id}, from the read models: the
// operation with its executions as of the projection's checkpoint. 404
// operation.unknown until the projection has folded its first event.
func (s *Server) getOperation(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	op, err := pathOperation(r)
	if err != nil {
		return reply{}, err
	}
	m := s.reads
	var v operationView
	err = m.db.QueryRow(r.Context(), m.sql(operationSQL), string(op)).Scan(&v.OperationID, &v.State, &v.Attempt, &v.AmountMinor,
		&v.Currency, &v.OrderID, &v.CorrelationID, &v.OrderTotalMinor, &v.CreatedAt, &v.UpdatedAt, &v.Version, &v.ProjectionIncomplete)
	if errors.Is(err, pgx.ErrNoRows) {
		return reply{}, notFound(string(domain.ReasonOperationUnknown),
			"no operation %s in the read models (a just-created operation appears once the projection catches up)", op)
	}
	if err != nil {
		return reply{}, readError("operation", err)
	}
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	rows, err := m.db.Query(r.Context(), m.sql(executionsOfSQL), string(op), maxExecutionsListed)
	if err != nil {
		return reply{}, readError("executions", err)
	}
	v.Executions, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (executionView, error) {
		var x executionView
		err := row.Scan(&x.ExecutionID, &x.State, &x.Attempt, &x.LeaseEpoch, &x.IdempotencyKey, &x.Outcome,
			&x.ProviderReference, &x.StartedAt, &x.EndedAt)
		x.StartedAt, x.EndedAt = x.StartedAt.UTC(), utc(x.EndedAt)
		return x, err
	})
	if err != nil {
		return reply{}, readError("executions", err)
	}
	if v.Executions == nil {
		v.Executions = []executionView{}
	}
	return ok(v), nil
}
