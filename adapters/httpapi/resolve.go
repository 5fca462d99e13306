package httpapi

import (
	"net/http"

	"opledger/domain"
	"opledger/domain/ledger"
)

type resolveRequest struct {
	Outcome           *string `json:"outcome"`
	ProviderReference string  `json:"provider_reference"`
	Evidence          *string `json:"evidence"`
}

type resolveResponse struct {
	ExecutionID       domain.ExecutionID     `json:"execution_id"`
	Outcome           domain.Outcome         `json:"outcome"`
	Method            domain.ReconcileMethod `json:"method"`
	Actor             string                 `json:"actor"`
	ProviderReference string                 `json:"provider_reference,omitempty"`
}

// resolve: POST /v1/executions/{id}/resolve. A person settles an Unknown or
// Escalated execution with evidence: recorded as Reconciled, method
// operator, naming the operator's token. Any other state is 409
// execution.not-unknown.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, x, err := pathExecution(r)
	if err != nil {
		return reply{}, err
	}
	var req resolveRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	text, err := need(req.Outcome, "outcome")
	if err != nil {
		return reply{}, err
	}
	outcome := domain.Outcome(text)
	if !outcome.Definite() {
		return reply{}, invalid("outcome", "outcome must be Completed or NotApplied, got %q", text)
	}
	evidence, err := need(req.Evidence, "evidence")
	if err != nil {
		return reply{}, err
	}
	if evidence == "" || len(evidence) > domain.MaxTextLength {
		return reply{}, invalid("evidence", "evidence must say, in 1..%d bytes, how the outcome was established", domain.MaxTextLength)
	}
	if r := domain.CheckText("evidence", evidence, domain.MaxTextLength, true); r != nil { // before the domain names it "detail"
		return reply{}, r
	}
	if len(req.ProviderReference) > 2*domain.MaxIDLength {
		return reply{}, invalid("provider_reference", "provider_reference is longer than %d bytes", 2*domain.MaxIDLength)
	}
	by := ledger.Cause{Actor: who.Name, CausationID: requestInfoFrom(r.Context()).id}
	if err := s.cfg.Ledger.Reconcile(r.Context(), op, domain.Reconcile{
		ExecutionID: x, Outcome: outcome, Method: domain.MethodOperator,
		ProviderReference: req.ProviderReference, Actor: who.Name, Evidence: evidence,
	}, by); err != nil {
		return reply{}, err
	}
	return ok(resolveResponse{ExecutionID: x, Outcome: outcome, Method: domain.MethodOperator, Actor: who.Name, ProviderReference: req.ProviderReference}), nil
}
