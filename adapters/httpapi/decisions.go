package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
)

type decisionRequest struct {
	Approver           *string       `json:"approver"`
	ApprovalLimitMinor *int64        `json:"approval_limit_minor"`
	Facts              *factsRequest `json:"facts"`
}

type factsRequest struct {
	OrderRefundable *bool  `json:"order_refundable"`
	ChargebackOpen  *bool  `json:"chargeback_open"`
	RefundedMinor   *int64 `json:"refunded_minor"`
	OrderTotalMinor *int64 `json:"order_total_minor"`
}

type decisionResponse struct {
	DecisionID    domain.DecisionID   `json:"decision_id"`
	Verdict       domain.Verdict      `json:"verdict"`
	Reasons       []string            `json:"reasons"`
	Attempt       int                 `json:"attempt"`
	PolicyVersion string              `json:"policy_version"`
	Capability    *capabilityResponse `json:"capability,omitempty"`
}

type capabilityResponse struct {
	CapabilityID domain.CapabilityID `json:"capability_id"`
	Token        string              `json:"token"`
	ExpiresAt    time.Time           `json:"expires_at"`
}

// decide: POST /v1/operations/{id}/decisions. It evaluates the policy for
// the operation's next attempt with the provider profile's key policy and,
// when Allowed, issues a capability in the same append and answers its
// signed token. Every fact is required: an absent chargeback_open must not
// read as false.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, err := pathOperation(r)
	if err != nil {
		return reply{}, err
	}
	var req decisionRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	cmd, err := req.command(s.cfg.Profile.KeyPolicy)
	if err != nil {
		return reply{}, err
	}
	by := ledger.Cause{Actor: who.Name, CausationID: requestInfoFrom(r.Context()).id}
	decided, issued, err := s.cfg.Ledger.DecideAndIssue(r.Context(), op, cmd, domain.IssueCapability{TTL: s.cfg.CapabilityTTL}, by)
	if err != nil {
		return reply{}, err
	}
	resp := decisionResponse{
		DecisionID: decided.DecisionID, Verdict: decided.Verdict, Reasons: decided.Reasons,
		Attempt: decided.Attempt, PolicyVersion: decided.PolicyVersion,
	}
	if resp.Reasons == nil {
		resp.Reasons = []string{}
	}
	if decided.Verdict == domain.Allowed {
		token, err := s.cfg.Signer.TokenFor(op, issued)
		if err != nil {
			return reply{}, fmt.Errorf("sign capability %s of %s: %w", issued.CapabilityID, op, err)
		}
		resp.Capability = &capabilityResponse{CapabilityID: issued.CapabilityID, Token: token, ExpiresAt: issued.ExpiresAt.UTC()}
	}
	return ok(resp), nil
}

func (req decisionRequest) command(policy domain.KeyPolicy) (domain.Decide, error) {
	approver, err := need(req.Approver, "approver")
	if err != nil {
		return domain.Decide{}, err
	}
	if approver == "" || len(approver) > domain.MaxIDLength {
		return domain.Decide{}, invalid("approver", "approver must be 1..%d bytes", domain.MaxIDLength)
	}
	limit, err := need(req.ApprovalLimitMinor, "approval_limit_minor")
	if err != nil {
		return domain.Decide{}, err
	}
	if limit < 0 {
		return domain.Decide{}, invalid("approval_limit_minor", "approval_limit_minor must not be negative")
	}
	f, err := need(req.Facts, "facts")
	if err != nil {
		return domain.Decide{}, err
	}
	var facts domain.Facts
	if facts.OrderRefundable, err = need(f.OrderRefundable, "facts.order_refundable"); err != nil {
		return domain.Decide{}, err
	}
	if facts.ChargebackOpen, err = need(f.ChargebackOpen, "facts.chargeback_open"); err != nil {
		return domain.Decide{}, err
	}
	if facts.RefundedMinor, err = need(f.RefundedMinor, "facts.refunded_minor"); err != nil {
		return domain.Decide{}, err
	}
	if facts.RefundedMinor < 0 {
		return domain.Decide{}, invalid("facts.refunded_minor", "facts.refunded_minor must not be negative")
	}
	if f.OrderTotalMinor != nil {
		if facts.OrderTotalMinor = *f.OrderTotalMinor; facts.OrderTotalMinor < 0 {
			return domain.Decide{}, invalid("facts.order_total_minor", "facts.order_total_minor must not be negative")
		}
	}
	return domain.Decide{Approver: approver, ApprovalLimitMinor: limit, Facts: facts, KeyPolicy: policy}, nil
}
