package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"opledger/adapters/captoken"
	"opledger/domain"
	"opledger/domain/ledger"
)

type claimRequest struct {
	MessageID     *string `json:"message_id"`
	CorrelationID *string `json:"correlation_id"`
	OperationID   *string `json:"operation_id"`
	Capability    *string `json:"capability"`
	WorkerID      *string `json:"worker_id"`
	// LeaseSeconds asks for a lease of this length (default 60, at most 3600).
	LeaseSeconds *int64 `json:"lease_seconds"`
}

type claimResponse struct {
	Status             domain.ClaimStatus `json:"status"`
	Reason             domain.Reason      `json:"reason,omitempty"`
	Detail             string             `json:"detail,omitempty"`
	ExecutionAttempted bool               `json:"execution_attempted"`
	ReplaySuspected    bool               `json:"replay_suspected"`
	// ExecutionID and ExecutionState: the execution opened (Claimed) or the
	// operation's current one as the presentation found it.
	ExecutionID    domain.ExecutionID    `json:"execution_id,omitempty"`
	ExecutionState domain.ExecutionState `json:"execution_state,omitempty"`
	LeaseEpoch     int64                 `json:"lease_epoch,omitempty"`
	LeaseExpiresAt *time.Time            `json:"lease_expires_at,omitempty"`
	// LeaseSecret, when Claimed, binds the lease to this caller: present it
	// on every renewal and outcome for the execution. It is answered once,
	// here; the ledger keeps only its digest.
	LeaseSecret    string                `json:"lease_secret,omitempty"`
	IdempotencyKey domain.IdempotencyKey `json:"idempotency_key,omitempty"`
	// Kind, Use and UsesLeft, when Claimed: the operation's kind, which
	// use of the capability the claim consumed, and how many it has left.
	Kind     domain.OperationKind `json:"kind,omitempty"`
	Use      int                  `json:"use,omitempty"`
	UsesLeft *int                 `json:"uses_left,omitempty"`
	// What to execute, when Claimed, from the ledger: a refund's amount,
	// currency and order, an export download's export.
	AmountMinor int64              `json:"amount_minor,omitempty"`
	Currency    string             `json:"currency,omitempty"`
	OrderID     string             `json:"order_id,omitempty"`
	ExportID    string             `json:"export_id,omitempty"`
	OperationID domain.OperationID `json:"operation_id,omitempty"`
}

// claim: POST /v1/claims. The token is verified first: a forged, altered or
// unreadable token is refused capability.invalid and recorded in the
// unattributed evidence stream, and the operation's stream is not touched.
// A genuine token becomes a claim bound to the token's capability,
// operation and attempt; the ledger judges whether it is still unused and
// records every answer. Every answer the ledger recorded is 200 with its
// status; when the answer could not be recorded (the store unreachable) it is
// 503 and never Claimed. A Claimed answer carries the lease secret, so it is
// sent with Cache-Control: no-store and is never logged; a caller that loses
// it cannot write for the execution (its lease lapses to Unknown and the
// reconciler asks the provider).
func (s *Server) claim(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	var req claimRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	cmd, op, token, err := req.command()
	if err != nil {
		return reply{}, err
	}
	claims, verr := s.cfg.Signer.Verify(token)
	if verr != nil {
		return s.refuseToken(r, who, op, cmd, token, verr)
	}
	cmd.CapabilityID, cmd.BoundOperation, cmd.BoundAttempt = claims.CapabilityID, claims.OperationID, claims.Attempt
	out, err := s.cfg.Ledger.ClaimAs(r.Context(), op, cmd, s.claimCause(who, cmd))
	if err != nil {
		return reply{}, err // never Claimed: nothing may execute
	}
	s.cfg.Metrics.ObserveClaim(out.Status, out.Reason)
	return ok(claimAnswer(out)), nil // no-store, as every answer (writeJSON)
}

// refuseToken records a presentation whose token does not verify and
// answers it as Invalid, capability.invalid.
func (s *Server) refuseToken(r *http.Request, who Principal, op domain.OperationID, cmd domain.Claim, token string, verr error) (reply, error) {
	detail := "capability token is malformed: " + verr.Error()
	if errors.Is(verr, captoken.ErrBadSignature) {
		detail = "capability token signature does not verify: forged, altered, or signed with another key"
	}
	// The evidence names the capability the token claims when it can be
	// read, else the token's fingerprint: never the token itself.
	capability := domain.CapabilityID(domain.PrefixCapability + "UNREADABLE-" + captoken.Fingerprint(token))
	if c, err := captoken.ParseUnverified(token); err == nil {
		capability = c.CapabilityID
		detail += fmt.Sprintf(" (token claims %s of %s, attempt %d)", c.CapabilityID, c.OperationID, c.Attempt)
	} else {
		detail += " (token fingerprint " + captoken.Fingerprint(token) + ")"
	}
	ev := domain.UnattributedPresentation(op, cmd.MessageID, capability, cmd.WorkerID, domain.ReasonCapabilityInvalid, detail, s.cfg.Ledger.Clock().Now())
	if err := s.cfg.Ledger.RecordUnattributed(r.Context(), ev, s.claimCause(who, cmd)); err != nil {
		return reply{}, err
	}
	s.cfg.Metrics.ObserveClaim(domain.StatusInvalid, domain.ReasonCapabilityInvalid)
	return ok(claimResponse{Status: domain.StatusInvalid, Reason: domain.ReasonCapabilityInvalid, Detail: detail, OperationID: op}), nil
}

// claimCause is who caused a presentation: the token's principal is the
// actor of every event it causes (docs/api.md, "Roles and tokens"); the
// request's worker_id is only the worker label, which the events keep
// beside it.
func (s *Server) claimCause(who Principal, cmd domain.Claim) ledger.Cause {
	return ledger.Cause{Actor: who.Name, CausationID: string(cmd.MessageID), CorrelationID: cmd.CorrelationID}
}

func claimAnswer(out ledger.ClaimOutcome) claimResponse {
	resp := claimResponse{
		Status: out.Status, Reason: out.Reason, ExecutionAttempted: out.ExecutionAttempted,
		ReplaySuspected: out.ReplaySuspected, ExecutionID: out.ExecutionID, ExecutionState: out.ExecutionState,
	}
	for _, e := range out.Events {
		if rej, isRej := e.(domain.PresentationRejected); isRej {
			resp.Detail = rej.Detail
		}
	}
	if out.Operation != nil {
		resp.OperationID = out.Operation.ID
	}
	if c := out.Claimed; out.Status == domain.StatusClaimed && c != nil && out.Operation != nil {
		// Amount, currency and order come from the ledger, never the message.
		exp := c.LeaseExpiresAt.UTC()
		resp.ExecutionID, resp.ExecutionState = c.ExecutionID, domain.ExecExecuting
		resp.LeaseEpoch, resp.LeaseExpiresAt, resp.IdempotencyKey = c.LeaseEpoch, &exp, c.IdempotencyKey
		resp.LeaseSecret = out.LeaseSecret
		left := out.UsesLeft
		resp.Kind, resp.Use, resp.UsesLeft = out.Operation.Kind, out.Use, &left
		resp.AmountMinor, resp.Currency, resp.OrderID = out.Operation.AmountMinor, out.Operation.Currency, out.Operation.OrderID
		resp.ExportID = out.Operation.ExportID
	}
	return resp
}

// command validates the request into a claim (without its capability,
// which comes from the verified token), the operation and the token.
func (req claimRequest) command() (domain.Claim, domain.OperationID, string, error) {
	var cmd domain.Claim
	msg, err := need(req.MessageID, "message_id")
	if err != nil {
		return cmd, "", "", err
	}
	if cmd.MessageID, err = domain.ParseMessageID(msg); err != nil {
		return cmd, "", "", invalid("message_id", "message_id: %v", err)
	}
	if req.CorrelationID != nil {
		if cmd.CorrelationID, err = domain.ParseCorrelationID(*req.CorrelationID); err != nil {
			return cmd, "", "", invalid("correlation_id", "correlation_id: %v", err)
		}
	}
	opText, err := need(req.OperationID, "operation_id")
	if err != nil {
		return cmd, "", "", err
	}
	op, err := domain.ParseOperationID(opText)
	if err != nil {
		return cmd, "", "", invalid("operation_id", "operation_id: %v", err)
	}
	token, err := need(req.Capability, "capability")
	if err != nil {
		return cmd, "", "", err
	}
	if token == "" {
		return cmd, "", "", invalid("capability", "capability must be the token the decision answered")
	}
	if cmd.WorkerID, err = need(req.WorkerID, "worker_id"); err != nil {
		return cmd, "", "", err
	}
	if _, err := domain.ParseMessageID(cmd.WorkerID); err != nil { // the ledger's rule for worker ids
		return cmd, "", "", invalid("worker_id", "worker_id must be 1..%d printable characters without spaces", domain.MaxIDLength)
	}
	if cmd.LeaseDuration, err = leaseDuration(req.LeaseSeconds); err != nil {
		return cmd, "", "", err
	}
	return cmd, op, token, nil
}

// leaseDuration reads an optional lease_seconds.
func leaseDuration(secs *int64) (time.Duration, error) {
	if secs == nil {
		return 0, nil
	}
	maxSecs := int64(domain.MaxLeaseDuration / time.Second)
	if *secs < 1 || *secs > maxSecs {
		return 0, invalid("lease_seconds", "lease_seconds must be 1..%d", maxSecs)
	}
	return time.Duration(*secs) * time.Second, nil
}
