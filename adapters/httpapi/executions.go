package httpapi

import (
	"net/http"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
)

type leaseRequest struct {
	LeaseEpoch *int64 `json:"lease_epoch"`
	// WorkerID, when given, must be the lease owner.
	WorkerID     *string `json:"worker_id"`
	LeaseSeconds *int64  `json:"lease_seconds"`
}

type leaseResponse struct {
	ExecutionID    domain.ExecutionID `json:"execution_id"`
	LeaseEpoch     int64              `json:"lease_epoch"`
	LeaseExpiresAt time.Time          `json:"lease_expires_at"`
}

// renewLease: POST /v1/executions/{id}/lease. 200 with the new expiry, or
// 409 lease.lost: the caller must stop, cancel its provider call and start
// no further request.
func (s *Server) renewLease(w http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	op, x, err := pathExecution(r)
	if err != nil {
		return reply{}, err
	}
	var req leaseRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	epoch, err := need(req.LeaseEpoch, "lease_epoch")
	if err != nil {
		return reply{}, err
	}
	cmd := domain.RenewLease{ExecutionID: x, LeaseEpoch: epoch}
	if req.WorkerID != nil {
		cmd.WorkerID = *req.WorkerID
	}
	if cmd.LeaseDuration, err = leaseDuration(req.LeaseSeconds); err != nil {
		return reply{}, err
	}
	ev, err := s.cfg.Ledger.RenewLease(r.Context(), op, cmd)
	if err != nil {
		return reply{}, err
	}
	return ok(leaseResponse{ExecutionID: ev.ExecutionID, LeaseEpoch: ev.LeaseEpoch, LeaseExpiresAt: ev.LeaseExpiresAt.UTC()}), nil
}

type outcomeRequest struct {
	LeaseEpoch        *int64  `json:"lease_epoch"`
	Outcome           *string `json:"outcome"`
	ProviderReference string  `json:"provider_reference"`
	Detail            string  `json:"detail"`
	// Late: the lease was lost while the request was in flight; record the
	// definite result as late evidence for this execution (it must be
	// Unknown or Escalated by now).
	Late bool `json:"late"`
}

type outcomeResponse struct {
	ExecutionID domain.ExecutionID `json:"execution_id"`
	Outcome     domain.Outcome     `json:"outcome"`
	Late        bool               `json:"late"`
}

// recordOutcome: POST /v1/executions/{id}/outcome. Recorded under the
// lease epoch (409 lease.lost when it is stale); with late:true, the stale
// executor's definite result for its own Unknown execution (409
// execution.not-unknown when it is not Unknown or Escalated, lease.lost for
// an epoch never held). A refused write is itself recorded as evidence.
func (s *Server) recordOutcome(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, x, err := pathExecution(r)
	if err != nil {
		return reply{}, err
	}
	var req outcomeRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	epoch, err := need(req.LeaseEpoch, "lease_epoch")
	if err != nil {
		return reply{}, err
	}
	text, err := need(req.Outcome, "outcome")
	if err != nil {
		return reply{}, err
	}
	outcome := domain.Outcome(text)
	switch {
	case req.Late && !outcome.Definite():
		return reply{}, invalid("outcome", "a late outcome must be Completed or NotApplied, got %q", text)
	case !outcome.Valid():
		return reply{}, invalid("outcome", "outcome must be Completed, NotApplied or Unknown, got %q", text)
	}
	if len(req.ProviderReference) > 2*domain.MaxIDLength {
		return reply{}, invalid("provider_reference", "provider_reference is longer than %d bytes", 2*domain.MaxIDLength)
	}
	if len(req.Detail) > domain.MaxTextLength {
		return reply{}, invalid("detail", "detail is longer than %d bytes", domain.MaxTextLength)
	}
	by := ledger.Cause{Actor: who.Name, CausationID: string(x)}
	if req.Late {
		err = s.cfg.Ledger.RecordLateOutcome(r.Context(), op, domain.RecordLateOutcome{
			ExecutionID: x, LeaseEpoch: epoch, Outcome: outcome, ProviderReference: req.ProviderReference, Detail: req.Detail,
		}, by)
	} else {
		err = s.cfg.Ledger.RecordOutcome(r.Context(), op, domain.RecordOutcome{
			ExecutionID: x, LeaseEpoch: epoch, Outcome: outcome, ProviderReference: req.ProviderReference, Detail: req.Detail,
		}, by)
	}
	if err != nil {
		return reply{}, err
	}
	return ok(outcomeResponse{ExecutionID: x, Outcome: outcome, Late: req.Late}), nil
}
