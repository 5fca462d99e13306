package httpapi

import (
	"net/http"
	"time"

	"opledger/domain"
)

type operationView struct {
	OperationID string `json:"operation_id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Attempt     int    `json:"attempt"`
	// AmountMinor, Currency and OrderID are a refund's (null for another
	// kind); ExportID an export download's (null for another kind).
	AmountMinor     *int64    `json:"amount_minor"`
	Currency        *string   `json:"currency"`
	OrderID         *string   `json:"order_id"`
	ExportID        *string   `json:"export_id"`
	UsesLeft        int       `json:"uses_left"`
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
	Use               int        `json:"use"`
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
	o, found, err := s.reads.Operation(r.Context(), string(op))
	if err != nil {
		return reply{}, readError("operation", err)
	}
	if !found {
		return reply{}, notFound(string(domain.ReasonOperationUnknown),
			"no operation %s in the read models (a just-created operation appears once the projection catches up)", op)
	}
	xs, err := s.reads.ExecutionsOf(r.Context(), string(op))
	if err != nil {
		return reply{}, readError("executions", err)
	}
	v := operationView{OperationID: o.ID, Kind: o.Kind, State: o.State, Attempt: o.Attempt, ExportID: o.ExportID, UsesLeft: o.UsesLeft,
		CorrelationID: o.CorrelationID, OrderTotalMinor: o.OrderTotalMinor, CreatedAt: o.CreatedAt,
		UpdatedAt: o.UpdatedAt, Version: o.Version, ProjectionIncomplete: o.ProjectionIncomplete,
		Executions: make([]executionView, 0, len(xs))}
	if o.Kind == string(domain.KindRefund) {
		v.AmountMinor, v.Currency, v.OrderID = &o.AmountMinor, &o.Currency, &o.OrderID
	}
	for _, x := range xs {
		v.Executions = append(v.Executions, executionView{ExecutionID: x.ID, State: x.State, Attempt: x.Attempt, Use: x.Use,
			LeaseEpoch: x.LeaseEpoch, IdempotencyKey: x.IdempotencyKey, Outcome: x.Outcome,
			ProviderReference: x.ProviderReference, StartedAt: x.StartedAt, EndedAt: x.EndedAt})
	}
	return ok(v), nil
}
