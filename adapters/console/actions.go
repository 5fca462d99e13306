package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"opledger/adapters/httpapi"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/domain/setaside"
)

// Every action runs the command the API runs for it, with the signed-in
// principal's name as the actor (recorded in the event and its metadata)
// and a causation id of its own (logged with the action), and answers
// 303 back to the page it came from with a message; a refusal is the
// ledger's, shown with its reason.

// cause is the ledger's record of who asked: the visitor, and this
// request (the X-Request-Id the API's server gave it, else an id of the
// console's own).
func cause(w http.ResponseWriter, v *visit) (ledger.Cause, string) {
	causation := w.Header().Get("X-Request-Id")
	if causation == "" {
		id, err := randomID()
		if err != nil {
			id = "unknown-request"
		}
		causation = "UI-" + id[:16]
	}
	return ledger.Cause{Actor: v.who.Name, CausationID: causation}, causation
}

// acknowledge: POST /ui/regressions/acknowledge {csrf, note}: a
// LogRegressionAcknowledged naming the signed-in operator, as POST
// /v1/regressions/acknowledge records it.
func (c *Console) acknowledge(w http.ResponseWriter, r *http.Request, v *visit) error {
	m := c.cfg.Health.Regressions
	if m == nil {
		return &pageError{status: http.StatusNotFound, heading: "No regression stream here", message: "This console follows no regression stream."}
	}
	note := strings.TrimSpace(r.PostForm.Get("note"))
	if note == "" {
		return badRequest("note is required: say what was done (the lost effects' escalations read, the provider checked)")
	}
	ack, err := m.Acknowledge(r.Context(), v.who.Name, note)
	if errors.Is(err, regression.ErrNothingToAcknowledge) {
		c.setFlash(w, r, "No log regression is unacknowledged.")
		redirectBack(w, r, "", "/ui/health")
		return nil
	}
	if err != nil {
		return err
	}
	c.cfg.Logger.InfoContext(r.Context(), "console: log regressions acknowledged", "regressions", ack.Regressions, "through", ack.Through,
		"actor", v.who.Name, "role", v.who.Role)
	c.setFlash(w, r, fmt.Sprintf("%d log regressions acknowledged by %s.", ack.Regressions, v.who.Name))
	redirectBack(w, r, "", "/ui/health")
	return nil
}

// resolve: POST /ui/executions/{id}/resolve {csrf, outcome, provider_reference,
// evidence, back}: Reconciled, method operator, as POST
// /v1/executions/{id}/resolve records it.
func (c *Console) resolve(w http.ResponseWriter, r *http.Request, v *visit) error {
	x, err := domain.ParseExecutionID(r.PathValue("id"))
	if err != nil {
		return badRequest("execution id: %v", err)
	}
	op, ok := domain.OperationOf(string(x))
	if !ok {
		return notFound("Execution %s does not name an operation (ids look like EXE-<operation>.<n>).", x)
	}
	f := r.PostForm
	outcome := domain.Outcome(f.Get("outcome"))
	if !outcome.Definite() {
		return badRequest("outcome must be Completed or NotApplied: say what the provider shows")
	}
	evidence := strings.TrimSpace(f.Get("evidence"))
	if evidence == "" {
		return badRequest("evidence is required: say how the outcome was established (a provider dashboard, a support ticket)")
	}
	if refusal := domain.CheckText("evidence", evidence, domain.MaxTextLength, true); refusal != nil {
		return refusal
	}
	ref := strings.TrimSpace(f.Get("provider_reference"))
	if refusal := domain.CheckText("provider_reference", ref, domain.MaxProviderReferenceLength, false); refusal != nil {
		return refusal
	}
	by, causation := cause(w, v)
	if err := c.cfg.Ledger.Reconcile(r.Context(), op, domain.Reconcile{
		ExecutionID: x, Outcome: outcome, Method: domain.MethodOperator, ProviderReference: ref, Actor: v.who.Name, Evidence: evidence,
	}, by); err != nil {
		return err
	}
	c.cfg.Logger.InfoContext(r.Context(), "console: execution resolved", "execution", x, "operation", op, "outcome", outcome,
		"actor", v.who.Name, "role", v.who.Role, "causation_id", causation)
	c.setFlash(w, r, fmt.Sprintf("%s resolved as %s by %s (recorded as Reconciled, method operator).", x, outcome, v.who.Name))
	redirectBack(w, r, f.Get("back"), "/ui/operations/"+string(op))
	return nil
}

// revoke: POST /ui/capabilities/{id}/revoke {csrf, reason, back}: the
// ledger's RevokeCapability, as POST /v1/capabilities/{id}/revoke.
func (c *Console) revoke(w http.ResponseWriter, r *http.Request, v *visit) error {
	capID, err := domain.ParseCapabilityID(r.PathValue("id"))
	if err != nil {
		return badRequest("capability id: %v", err)
	}
	op, ok := domain.OperationOf(string(capID))
	if !ok {
		return notFound("Capability %s does not name an operation (ids look like CAP-<operation>.<n>).", capID)
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if refusal := domain.CheckText("reason", reason, domain.MaxTextLength, false); refusal != nil {
		return refusal
	}
	by, causation := cause(w, v)
	if err := c.cfg.Ledger.RevokeCapability(r.Context(), op, domain.RevokeCapability{CapabilityID: capID, Reason: reason, Actor: v.who.Name}, by); err != nil {
		return err
	}
	c.cfg.Logger.InfoContext(r.Context(), "console: capability revoked", "capability", capID, "operation", op,
		"actor", v.who.Name, "role", v.who.Role, "causation_id", causation)
	c.setFlash(w, r, fmt.Sprintf("%s revoked by %s.", capID, v.who.Name))
	redirectBack(w, r, r.PostForm.Get("back"), "/ui/operations/"+string(op))
	return nil
}

// resubmit: POST /ui/dead-letters/resubmit {csrf, id | all=1}: the
// transport's Resubmit, as `opledger dlq resubmit`, by the visitor. The
// copies carry new message ids; the ledger still refuses any whose
// authority is spent (see the evidence page).
func (c *Console) resubmit(w http.ResponseWriter, r *http.Request, v *visit) error {
	if c.cfg.DeadLetters == nil {
		return &pageError{status: http.StatusNotFound, heading: "No dead letters here", message: "This console has no dead-letter queue configured."}
	}
	req := transport.ResubmitRequest{By: v.who.Name, Limit: transport.DefaultResubmitLimit}
	if r.PostForm.Get("all") == "1" {
		req.All = true
	} else {
		id := strings.TrimSpace(r.PostForm.Get("id"))
		if id == "" || domain.CheckText("id", id, domain.MaxIDLength, true) != nil {
			return badRequest("say which dead letter to resubmit (id), or all")
		}
		req.IDs = []string{id}
	}
	done, err := c.cfg.DeadLetters.Resubmit(r.Context(), req)
	for _, d := range done {
		c.cfg.Logger.InfoContext(r.Context(), "console: dead letter resubmitted", "dead_letter", d.DeadLetterID, "message_id", d.MessageID,
			"actor", v.who.Name, "role", v.who.Role)
	}
	switch {
	case errors.Is(err, transport.ErrDeadLetterNotFound):
		return notFound("%v", err)
	case errors.Is(err, transport.ErrAlreadyResubmitted):
		return &pageError{status: http.StatusConflict, heading: "Already resubmitted", message: err.Error() + "."}
	case err != nil:
		return err
	}
	msg := fmt.Sprintf("%d dead letter(s) resubmitted by %s under new message ids.", len(done), v.who.Name)
	if len(done) == 1 {
		msg = fmt.Sprintf("%s resubmitted by %s as %s.", done[0].DeadLetterID, v.who.Name, done[0].MessageID)
	}
	c.setFlash(w, r, msg+" The ledger still judges each copy: spent authority is refused and shows on the evidence page.")
	redirectBack(w, r, "", "/ui/dead-letters")
	return nil
}

// release: POST /ui/set-aside/release {csrf, role, item}: forgets the
// item's failures so its loop tries it again, as POST /v1/set-aside/release.
func (c *Console) release(w http.ResponseWriter, r *http.Request, v *visit) error {
	if c.cfg.SetAside == nil {
		return &pageError{status: http.StatusNotFound, heading: "No set-aside items here", message: "This console has no set-aside store configured."}
	}
	role := setaside.Role(r.PostForm.Get("role"))
	if !role.Known() {
		return badRequest("role must name a loop")
	}
	item := r.PostForm.Get("item")
	if domain.CheckText("item", item, 2*domain.MaxIDLength, true) != nil {
		return badRequest("item must name the failing item")
	}
	it, found, err := c.cfg.SetAside.Get(r.Context(), role, item)
	if err != nil {
		return err
	}
	if !found {
		return notFound("%s has no failing item %q.", role, item)
	}
	if err := c.cfg.SetAside.Clear(r.Context(), role, item); err != nil {
		return err
	}
	c.cfg.Logger.InfoContext(r.Context(), "console: set-aside item released", "loop", role, "item", item, "operation_id", it.OperationID,
		"attempts", it.Attempts, "reason", it.Reason, "actor", v.who.Name, "role", v.who.Role)
	c.setFlash(w, r, fmt.Sprintf("%s %s released by %s: %s.", role, item, v.who.Name, httpapi.ReleaseNote(role)))
	redirectBack(w, r, "", "/ui/health")
	return nil
}

// endSessions: POST /ui/sessions/end {csrf, token}: every open console
// session of the token whose SHA-256 (hex) is token ends, on every
// instance; its cookies are refused from the next request on.
func (c *Console) endSessions(w http.ResponseWriter, r *http.Request, v *visit) error {
	digest := strings.TrimSpace(r.PostForm.Get("token"))
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return badRequest("token must be a token's SHA-256 in hex, as the health page's form sends it")
	}
	n, err := c.cfg.Sessions.EndToken(r.Context(), digest, v.who.Name, c.cfg.Now())
	if err != nil {
		return err
	}
	c.cfg.Logger.InfoContext(r.Context(), "console: sessions of a token ended", "token", "sha256:"+digest[:12], "sessions", n,
		"role", v.who.Role, "actor", v.who.Name)
	c.setFlash(w, r, fmt.Sprintf("Ended %d console sessions of token sha256:%s… (by %s).", n, digest[:12], v.who.Name))
	http.Redirect(w, r, "/ui/health#h-sessions", http.StatusSeeOther)
	return nil
}
