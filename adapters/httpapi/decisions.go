package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
)

// decisionRequest holds the fields of every kind's decision; which apply is
// the operation's kind's (a refund: approval_limit_minor and the order's
// facts; an export download: uses and facts.export_ready).
type decisionRequest struct {
	Approver           *string       `json:"approver"`
	ApprovalLimitMinor *int64        `json:"approval_limit_minor"`
	Uses               *int          `json:"uses"`
	Facts              *factsRequest `json:"facts"`
}

type factsRequest struct {
	OrderRefundable *bool  `json:"order_refundable"`
	ChargebackOpen  *bool  `json:"chargeback_open"`
	RefundedMinor   *int64 `json:"refunded_minor"`
	OrderTotalMinor *int64 `json:"order_total_minor"`
	ExportReady     *bool  `json:"export_ready"`
}

type decisionResponse struct {
	DecisionID    domain.DecisionID    `json:"decision_id"`
	Kind          domain.OperationKind `json:"kind"`
	Verdict       domain.Verdict       `json:"verdict"`
	Reasons       []string             `json:"reasons"`
	Attempt       int                  `json:"attempt"`
	Uses          int                  `json:"uses"`
	PolicyVersion string               `json:"policy_version"`
	Capability    *capabilityResponse  `json:"capability,omitempty"`
}

type capabilityResponse struct {
	CapabilityID domain.CapabilityID `json:"capability_id"`
	Token        string              `json:"token"`
	Uses         int                 `json:"uses"`
	ExpiresAt    time.Time           `json:"expires_at"`
}

// decide: POST /v1/operations/{id}/decisions. It evaluates the policy of
// the operation's kind for its next attempt (a refund with the provider
// profile's key policy) and, when Allowed, issues a capability of the uses
// decided in the same append and answers its signed token. Every fact of
// the kind is required: an absent chargeback_open must not read as false;
// an export download's uses are required too.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, err := pathOperation(r)
	if err != nil {
		return reply{}, err
	}
	var req decisionRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	kind, err := s.cfg.Ledger.Kind(r.Context(), op) // the kind says which fields apply
	if err != nil {
		return reply{}, err
	}
	var cmd domain.Decide
	if kind == domain.KindExportDownload {
		cmd, err = req.exportCommand()
	} else {
		cmd, err = req.command(s.cfg.Profile.KeyPolicy)
	}
	if err != nil {
		return reply{}, err
	}
	by := ledger.Cause{Actor: who.Name, CausationID: requestInfoFrom(r.Context()).id}
	decided, issued, err := s.cfg.Ledger.DecideAndIssue(r.Context(), op, cmd, domain.IssueCapability{TTL: s.cfg.CapabilityTTL}, by)
	if err != nil {
		return reply{}, err
	}
	resp := decisionResponse{
		DecisionID: decided.DecisionID, Kind: decided.Kind, Verdict: decided.Verdict, Reasons: decided.Reasons,
		Attempt: decided.Attempt, Uses: decided.Uses, PolicyVersion: decided.PolicyVersion,
	}
	if resp.Reasons == nil {
		resp.Reasons = []string{}
	}
	if decided.Verdict == domain.Allowed {
		token, err := s.cfg.Signer.TokenFor(op, issued)
		if err != nil {
			return reply{}, fmt.Errorf("sign capability %s of %s: %w", issued.CapabilityID, op, err)
		}
		resp.Capability = &capabilityResponse{CapabilityID: issued.CapabilityID, Token: token, Uses: issued.Uses, ExpiresAt: issued.ExpiresAt.UTC()}
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
	if f.ExportReady != nil {
		return domain.Decide{}, invalid("facts.export_ready", "facts.export_ready is an %s's; a refund states the order's facts", domain.KindExportDownload)
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
	cmd := domain.Decide{Approver: approver, ApprovalLimitMinor: limit, Facts: facts, KeyPolicy: policy}
	if req.Uses != nil {
		cmd.Uses = *req.Uses
		if cmd.Uses != 1 {
			return domain.Decide{}, invalid("uses", "a refund is single use: uses must be 1 or absent, got %d", cmd.Uses)
		}
	}
	return cmd, nil
}

// exportCommand validates an export download's decision: approver, uses
// (1 to domain.MaxExportDownloads) and facts.export_ready, all required,
// and none of a refund's fields. Its keys are per attempt (per use within
// it), whatever the refund provider's profile says.
func (req decisionRequest) exportCommand() (domain.Decide, error) {
	approver, err := need(req.Approver, "approver")
	if err != nil {
		return domain.Decide{}, err
	}
	if approver == "" || len(approver) > domain.MaxIDLength {
		return domain.Decide{}, invalid("approver", "approver must be 1..%d bytes", domain.MaxIDLength)
	}
	if req.ApprovalLimitMinor != nil {
		return domain.Decide{}, invalid("approval_limit_minor", "approval_limit_minor is a refund's; an %s decision has uses", domain.KindExportDownload)
	}
	uses, err := need(req.Uses, "uses")
	if err != nil {
		return domain.Decide{}, err
	}
	if uses < 1 || uses > domain.MaxExportDownloads {
		return domain.Decide{}, invalid("uses", "uses must be 1 to %d, got %d", domain.MaxExportDownloads, uses)
	}
	f, err := need(req.Facts, "facts")
	if err != nil {
		return domain.Decide{}, err
	}
	for _, x := range []struct {
		field string
		set   bool
	}{{"facts.order_refundable", f.OrderRefundable != nil}, {"facts.chargeback_open", f.ChargebackOpen != nil},
		{"facts.refunded_minor", f.RefundedMinor != nil}, {"facts.order_total_minor", f.OrderTotalMinor != nil}} {
		if x.set {
			return domain.Decide{}, invalid(x.field, "%s is a refund's; an %s decision states facts.export_ready", x.field, domain.KindExportDownload)
		}
	}
	ready, err := need(f.ExportReady, "facts.export_ready")
	if err != nil {
		return domain.Decide{}, err
	}
	return domain.Decide{Approver: approver, Uses: uses, ExportFacts: domain.ExportFacts{ExportReady: ready}, KeyPolicy: domain.KeyPerAttempt}, nil
}
