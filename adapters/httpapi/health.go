package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"time"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 3 * time.Second

type statusResponse struct {
	Status string `json:"status"`
}

// readyResponse is /readyz's body: the overall status, each background
// role, and (when not ready) the error every 503 of this API carries.
type readyResponse struct {
	Status      string       `json:"status"`
	Roles       []RoleStatus `json:"roles"`
	Replication *Replication `json:"replication,omitempty"`
	Error       *errorDetail `json:"error,omitempty"`
}

// healthz: GET /healthz, no token. 200 while the process serves HTTP;
// it checks nothing else (a liveness probe must not restart a server whose
// database is down).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	data, _ := encodeBody(statusResponse{Status: "ok"})
	writeJSON(w, http.StatusOK, nil, data)
}

// readyz: GET /readyz, no token. 200 {"status":"ready","roles":[...]} when
// Config.Ready (default: the read models answer) reports nil, every role
// of Status.Roles is OK, and replication, when required, is synchronous,
// all within readyTimeout; else 503 not-ready with the reasons, the same
// roles, and Retry-After. The body's replication says what was last
// checked, required or not.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	ready := s.cfg.Ready
	if ready == nil {
		ready = s.reads.ping
	}
	var reasons []string
	if err := ready(ctx); err != nil {
		reasons = append(reasons, err.Error())
	}
	roles := []RoleStatus{}
	if s.cfg.Status.Roles != nil {
		roles = s.cfg.Status.Roles(ctx)
	}
	for _, role := range roles {
		if !role.OK {
			reason := role.Role + " " + role.State
			if detail := cmp.Or(role.Detail, role.LastError); detail != "" {
				reason += ": " + detail
			}
			reasons = append(reasons, reason)
		}
	}
	var repl *Replication
	if s.cfg.Status.Replication != nil {
		r := s.cfg.Status.Replication()
		repl = &r
		if r.Required && !r.Synchronous {
			reasons = append(reasons, "replication required: "+r.Detail)
		}
	}
	if len(reasons) > 0 {
		e := &apiError{status: http.StatusServiceUnavailable, code: CodeNotReady, message: "not ready: " + strings.Join(reasons, "; "), retryAfter: "1"}
		requestInfoFrom(r.Context()).err = e
		data, _ := encodeBody(readyResponse{Status: "not-ready", Roles: roles, Replication: repl, Error: &errorDetail{Code: e.code, Message: e.message}})
		writeJSON(w, e.status, http.Header{"Retry-After": {e.retryAfter}}, data)
		return
	}
	data, _ := encodeBody(readyResponse{Status: "ready", Roles: roles, Replication: repl})
	writeJSON(w, http.StatusOK, nil, data)
}
