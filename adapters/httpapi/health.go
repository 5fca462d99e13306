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
// role, the alarms a person must look at, and (when not ready) the error
// every 503 of this API carries.
type readyResponse struct {
	Status      string       `json:"status"`
	Roles       []RoleStatus `json:"roles"`
	Replication *Replication `json:"replication,omitempty"`
	Alarms      []Alarm      `json:"alarms"`
	Error       *errorDetail `json:"error,omitempty"`
}

// Alarm is something /readyz reports without failing: the server works,
// but a person must look (a log regression no operator acknowledged).
type Alarm struct {
	// Kind names it: AlarmLogRegression, or another role's.
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
	// Since is when it was raised, when known.
	Since *time.Time `json:"since,omitempty"`
}

// AlarmLogRegression: a log regression is recorded that no operator has
// acknowledged (GET /v1/regressions).
const AlarmLogRegression = "log-regression"

// healthz: GET /healthz, no token. 200 while the process serves HTTP;
// it checks nothing else (a liveness probe must not restart a server whose
// database is down).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	_ = writeBody(w, http.StatusOK, nil, statusResponse{Status: "ok"})
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
	alarms := s.alarms(ctx)
	if len(reasons) > 0 {
		e := &apiError{status: http.StatusServiceUnavailable, code: CodeNotReady, message: "not ready: " + strings.Join(reasons, "; "), retryAfter: "1"}
		requestInfoFrom(r.Context()).err = e
		_ = writeBody(w, e.status, http.Header{"Retry-After": {e.retryAfter}}, readyResponse{Status: "not-ready", Roles: roles, Replication: repl, Alarms: alarms, Error: &errorDetail{Code: e.code, Message: e.message}})
		return
	}
	_ = writeBody(w, http.StatusOK, nil, readyResponse{Status: "ready", Roles: roles, Replication: repl, Alarms: alarms})
}

// alarms are what /readyz reports without failing: a log regression no
// operator acknowledged (the server dropped what it remembered and serves
// from what the store holds; a person must look at what was lost), and
// Status.Alarms'. Never nil.
func (s *Server) alarms(ctx context.Context) []Alarm {
	out := []Alarm{}
	if m := s.cfg.Regressions; m != nil {
		_ = m.Refresh(ctx) // a failed read keeps the last status
		if st := m.Status(); st.Alarm() {
			since := st.Recent[len(st.Recent)-1].NoticedAt.UTC() // the oldest kept
			out = append(out, Alarm{Kind: AlarmLogRegression, Detail: st.Summary(), Since: &since})
		}
	}
	if s.cfg.Status.Alarms != nil {
		out = append(out, s.cfg.Status.Alarms(ctx)...)
	}
	return out
}
