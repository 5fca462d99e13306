package httpapi

import (
	"errors"
	"net/http"
	"time"

	"opledger/domain"
	"opledger/domain/regression"
)

// CodeNothingToAcknowledge answers an acknowledgement when no log
// regression is unacknowledged (409).
const CodeNothingToAcknowledge = "regression.none-unacknowledged"

// regressionsResponse is GET /v1/regressions: the regression stream as
// the server's monitor last read it.
type regressionsResponse struct {
	// Unacknowledged counts the LogRegressed events recorded since the
	// last acknowledgement; Regressions are the newest of them (at most
	// 20), newest first.
	Unacknowledged int64                 `json:"unacknowledged"`
	Regressions    []regression.Recorded `json:"regressions"`
	Total          int64                 `json:"total"`
	// Through is the version of evidence-regressions an acknowledgement
	// now covers.
	Through          int64                             `json:"through"`
	LastAcknowledged *domain.LogRegressionAcknowledged `json:"last_acknowledged"`
	CheckedAt        time.Time                         `json:"checked_at"`
	Error            string                            `json:"error,omitempty"`
}

type acknowledgeRequest struct {
	Note *string `json:"note"`
}

// listRegressions: GET /v1/regressions. What the regression monitor read
// last of domain.RegressionStream (refreshed first, on the request's
// context): the log regressions not yet acknowledged, newest first.
func (s *Server) listRegressions(_ http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	m := s.cfg.Regressions
	if m == nil {
		return reply{}, notFound(CodeNotFound, "this server follows no regression stream")
	}
	_ = m.Refresh(r.Context()) // a failed read keeps the last status, with its error
	return ok(regressionsView(m.Status())), nil
}

func regressionsView(st regression.Status) regressionsResponse {
	return regressionsResponse{Unacknowledged: st.Unacknowledged, Regressions: st.Recent, Total: st.Total, Through: st.Through,
		LastAcknowledged: st.LastAcknowledged, CheckedAt: st.Checked.UTC(), Error: st.Error}
}

// acknowledgeRegressions: POST /v1/regressions/acknowledge {"note": ...}.
// An operator records that every log regression recorded so far has been
// seen (LogRegressionAcknowledged, naming the token's NAME), with a note of
// what was done (the escalations read, the provider checked): /readyz,
// metrics and the console stop saying so until the next one. 409
// regression.none-unacknowledged when there is none.
func (s *Server) acknowledgeRegressions(w http.ResponseWriter, r *http.Request, who Principal) (reply, error) {
	m := s.cfg.Regressions
	if m == nil {
		return reply{}, notFound(CodeNotFound, "this server follows no regression stream")
	}
	var req acknowledgeRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	note, err := need(req.Note, "note")
	if err != nil {
		return reply{}, err
	}
	_, err = m.Acknowledge(r.Context(), who.Name, note)
	if errors.Is(err, regression.ErrNothingToAcknowledge) {
		return reply{}, &apiError{status: http.StatusConflict, code: CodeNothingToAcknowledge, message: "no log regression is unacknowledged"}
	}
	if err != nil {
		return reply{}, err
	}
	return ok(regressionsView(m.Status())), nil
}
