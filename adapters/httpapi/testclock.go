package httpapi

import (
	"net/http"
	"time"
)

type testClockRequest struct {
	Advance *string `json:"advance"`
}

type testClockResponse struct {
	Now time.Time `json:"now"`
}

// advanceTestClock: POST /v1/test-clock {"advance":"25h"}. Only when the
// server was given a TestClock (serve --test-clock); otherwise 404
// test-clock.disabled. Moves the ledger's clock forward (never back) and
// answers the new now, so expiry and lease lapse can be reached from outside.
func (s *Server) advanceTestClock(w http.ResponseWriter, r *http.Request, _ Principal) (reply, error) {
	if s.cfg.TestClock == nil {
		return reply{}, notFound(CodeTestClockDisabled, "the test clock is disabled: start the server with --test-clock (never in production)")
	}
	var req testClockRequest
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		return reply{}, err
	}
	text, err := need(req.Advance, "advance")
	if err != nil {
		return reply{}, err
	}
	d, perr := time.ParseDuration(text)
	if perr != nil || d <= 0 || d > MaxTestClockAdvance {
		return reply{}, invalid("advance", "advance must be a positive Go duration up to %s, like \"25h\" or \"90s\"; got %q", MaxTestClockAdvance, text)
	}
	return ok(testClockResponse{Now: s.cfg.TestClock.Advance(d).UTC()}), nil
}
