package httpapi

import (
	"context"
	"net/http"
	"time"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 3 * time.Second

type statusResponse struct {
	Status string `json:"status"`
}

// healthz: GET /healthz, no token. 200 while the process serves HTTP;
// it checks nothing else (a liveness probe must not restart a server whose
// database is down).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	data, _ := encodeBody(statusResponse{Status: "ok"})
	writeJSON(w, http.StatusOK, nil, data)
}

// readyz: GET /readyz, no token. 200 when Config.Ready (default: the read
// models answer) reports nil within readyTimeout, else 503 not-ready with
// its reason.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	ready := s.cfg.Ready
	if ready == nil {
		ready = s.reads.ping
	}
	if err := ready(ctx); err != nil {
		e := &apiError{status: http.StatusServiceUnavailable, code: CodeNotReady, message: "not ready: " + err.Error(), retryAfter: "1"}
		requestInfoFrom(r.Context()).err = e
		writeError(w, e)
		return
	}
	data, _ := encodeBody(statusResponse{Status: "ready"})
	writeJSON(w, http.StatusOK, nil, data)
}
