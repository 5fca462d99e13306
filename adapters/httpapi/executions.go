package httpapi

import (
	"errors"
	"net/http"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
)

// The executor's writes: renew a lease, record an outcome (or late
// evidence). Each needs the lease secret the claim returned (lease_secret):
// only the holder of an execution's lease writes for it, and knowing its id
// and epoch is not authority. A missing or wrong secret is 409
// lease.not-held. Every refused write, whatever refused it (a body that
// cannot be read, a malformed or hostile field, the secret, a stale epoch, a
// state that does not accept it), is recorded as WriteRefused evidence in
// the operation's stream before the answer is sent, hostile text escaped; a
// refusal that cannot be recorded is answered 503. Only a write naming no
// execution of an existing operation (404) leaves no trace.

type leaseRequest struct {
	LeaseEpoch *int64 `json:"lease_epoch"`
	// LeaseSecret is the secret the claim returned; required.
	LeaseSecret *string `json:"lease_secret"`
	// WorkerID, when given, must be the lease owner.
	WorkerID     *string `json:"worker_id"`
	LeaseSeconds *int64  `json:"lease_seconds"`
}

type leaseResponse struct {
	ExecutionID    domain.ExecutionID `json:"execution_id"`
	LeaseEpoch     int64              `json:"lease_epoch"`
	LeaseExpiresAt time.Time          `json:"lease_expires_at"`
}

// renewLease: POST /v1/executions/{id}/lease. 200 with the new expiry; 409
// lease.lost (the epoch moved or the execution no longer runs) or
// lease.not-held (no or another secret): the caller must stop, cancel its
// provider call and start no further request.
func (s *Server) renewLease(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, x, err := pathExecution(r)
	if err != nil {
		return reply{}, err
	}
	by := ledger.Cause{Actor: who.Name, CausationID: string(x)}
	var req leaseRequest
	derr := decodeBody(w, r, s.cfg.MaxBodyBytes, &req)
	cmd := domain.RenewLease{ExecutionID: x, LeaseEpoch: value(req.LeaseEpoch), LeaseSecret: value(req.LeaseSecret), WorkerID: value(req.WorkerID)}
	if derr == nil {
		if _, derr = need(req.LeaseEpoch, "lease_epoch"); derr == nil {
			cmd.LeaseDuration, derr = leaseDuration(req.LeaseSeconds)
		}
	}
	if derr != nil {
		return reply{}, s.refuseWrite(r, op, domain.RefuseWrite{
			ExecutionID: x, Command: domain.CommandRenewLease, LeaseEpoch: cmd.LeaseEpoch, LeaseSecret: cmd.LeaseSecret, WorkerID: cmd.WorkerID,
		}, derr, by)
	}
	ev, err := s.cfg.Ledger.RenewLease(r.Context(), op, cmd, by)
	if err != nil {
		return reply{}, err
	}
	return ok(leaseResponse{ExecutionID: ev.ExecutionID, LeaseEpoch: ev.LeaseEpoch, LeaseExpiresAt: ev.LeaseExpiresAt.UTC()}), nil
}

type outcomeRequest struct {
	LeaseEpoch *int64 `json:"lease_epoch"`
	// LeaseSecret is the secret the claim returned; required.
	LeaseSecret       *string `json:"lease_secret"`
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

// recordOutcome: POST /v1/executions/{id}/outcome. Recorded under the lease
// epoch by the holder of its secret (409 lease.lost when the epoch is stale,
// lease.not-held without the holder's secret); with late:true, the holder's
// definite result for its own Unknown execution (409 execution.not-unknown
// when it is not Unknown or Escalated, lease.lost for an epoch its secret
// did not hold). A malformed or hostile field is 400 naming it.
func (s *Server) recordOutcome(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, x, err := pathExecution(r)
	if err != nil {
		return reply{}, err
	}
	by := ledger.Cause{Actor: who.Name, CausationID: string(x)}
	var req outcomeRequest
	derr := decodeBody(w, r, s.cfg.MaxBodyBytes, &req)
	epoch, secret, outcome := value(req.LeaseEpoch), value(req.LeaseSecret), domain.Outcome(value(req.Outcome))
	if derr == nil {
		if _, derr = need(req.LeaseEpoch, "lease_epoch"); derr == nil {
			_, derr = need(req.Outcome, "outcome")
		}
	}
	command := domain.CommandRecordOutcome
	if req.Late {
		command = domain.CommandRecordLateOutcome
	}
	if derr != nil {
		return reply{}, s.refuseWrite(r, op, domain.RefuseWrite{
			ExecutionID: x, Command: command, LeaseEpoch: epoch, LeaseSecret: secret, Outcome: outcome,
			ProviderReference: req.ProviderReference, Detail: req.Detail,
		}, derr, by)
	}
	if req.Late {
		err = s.cfg.Ledger.RecordLateOutcome(r.Context(), op, domain.RecordLateOutcome{
			ExecutionID: x, LeaseEpoch: epoch, LeaseSecret: secret, Outcome: outcome, ProviderReference: req.ProviderReference, Detail: req.Detail,
		}, by)
	} else {
		err = s.cfg.Ledger.RecordOutcome(r.Context(), op, domain.RecordOutcome{
			ExecutionID: x, LeaseEpoch: epoch, LeaseSecret: secret, Outcome: outcome, ProviderReference: req.ProviderReference, Detail: req.Detail,
		}, by)
	}
	if err != nil {
		return reply{}, err
	}
	return ok(outcomeResponse{ExecutionID: x, Outcome: outcome, Late: req.Late}), nil
}

// refuseWrite records an executor write refused here, at the edge, as the
// ledger records the ones it refuses, and returns the edge's answer (edge).
// When the evidence cannot be recorded it returns the store's error instead
// (503): nothing is refused without a trace. A write naming no execution of
// op records nothing and keeps the edge's answer.
func (s *Server) refuseWrite(r *http.Request, op domain.OperationID, wr domain.RefuseWrite, edge error, by ledger.Cause) error {
	e := classify(edge)
	wr.Refusal = &domain.Refusal{Reason: domain.ReasonCommandInvalid, Field: e.field, Detail: e.code + ": " + e.message}
	err := s.cfg.Ledger.RefuseWrite(r.Context(), op, wr, by)
	var refusal *domain.Refusal
	if err != nil && !errors.As(err, &refusal) {
		return err
	}
	return edge
}

// value is *p, or the zero value when p is nil.
func value[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
