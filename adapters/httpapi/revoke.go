package httpapi

import (
	"net/http"

	"opledger/domain"
	"opledger/domain/ledger"
)

type revokeRequest struct {
	Reason string `json:"reason"`
}

type revokeResponse struct {
	CapabilityID domain.CapabilityID    `json:"capability_id"`
	State        domain.CapabilityState `json:"state"`
}

// revoke: POST /v1/capabilities/{id}/revoke, body optional. Unused
// authority is withdrawn; a consumed capability is 409
// capability.consumed-cannot-revoke, a revoked one 409
// capability.already-revoked, an unknown one 409 capability.invalid.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	op, c, err := pathCapability(r)
	if err != nil {
		return reply{}, err
	}
	var req revokeRequest
	if err := decodeOptionalBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	if len(req.Reason) > domain.MaxTextLength {
		return reply{}, invalid("reason", "reason is longer than %d bytes", domain.MaxTextLength)
	}
	by := ledger.Cause{Actor: who.Name, CausationID: requestInfoFrom(r.Context()).id}
	if err := s.cfg.Ledger.RevokeCapability(r.Context(), op, domain.RevokeCapability{CapabilityID: c, Reason: req.Reason, Actor: who.Name}, by); err != nil {
		return reply{}, err
	}
	return ok(revokeResponse{CapabilityID: c, State: domain.CapRevoked}), nil
}
