package console

import (
	"net/http"
	"slices"

	"opledger/adapters/httpapi"

	"opledger/domain/regression"
	"opledger/domain/setaside"
	"opledger/projections"
)

// maxSetAsideShown bounds the set-aside items listed.
const maxSetAsideShown = 100

type healthView struct {
	// HasRegressions: a regression monitor runs here; Regressions is what
	// it read last.
	HasRegressions bool
	Regressions    regression.Status
	// Replication is nil when nothing checks it beside this console.
	Replication *httpapi.Replication
	HasLag      bool
	Lag         projections.Lag
	LagError    string
	Roles       []httpapi.RoleStatus
	Relays      []RelayState
	HasItems    bool
	Items       []setaside.Item
	ItemsErr    string
	// Sessions are the console sessions open now, by token.
	Sessions    []tokenSessions
	SessionsErr string
	// Charts are the pictures of the last hour or day (charts.go).
	Charts chartsView
}

// tokenSessions are the open console sessions of one token.
type tokenSessions struct {
	Digest, Short string // the token's SHA-256 (hex), and its first 12 digits
	Principal     string
	Role          string
	Sessions      []SessionRecord
}

// maxSessionsShown bounds the open sessions listed.
const maxSessionsShown = 200

// health: GET /ui/health, a log regression no operator acknowledged (with
// the acknowledgement form for operators), the event store's replication,
// the projector's and relays' lag, each role's state, and the loops'
// failing and set-aside items.
func (c *Console) health(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	vw := healthView{}
	h := c.cfg.Health
	if h.Regressions != nil {
		_ = h.Regressions.Refresh(ctx) // a failed read keeps the last status, with its error
		vw.HasRegressions, vw.Regressions = true, h.Regressions.Status()
	}
	if h.Replication != nil {
		r := h.Replication()
		vw.Replication = &r
	}
	if h.ProjectionLag != nil {
		vw.HasLag = true
		lag, err := h.ProjectionLag(ctx)
		if err != nil {
			vw.LagError = err.Error()
		}
		vw.Lag = lag
	}
	if h.Roles != nil {
		vw.Roles = h.Roles(ctx)
	}
	if h.Relays != nil {
		vw.Relays = h.Relays(ctx)
	}
	if c.cfg.SetAside != nil {
		vw.HasItems = true
		items, err := c.cfg.SetAside.List(ctx, setaside.Query{Limit: maxSetAsideShown})
		if err != nil {
			vw.ItemsErr = err.Error()
		}
		vw.Items = items
	}
	sessions, err := c.cfg.Sessions.List(ctx, c.cfg.Now(), maxSessionsShown)
	if err != nil {
		vw.SessionsErr = err.Error()
	}
	for _, s := range sessions {
		i := slices.IndexFunc(vw.Sessions, func(t tokenSessions) bool { return t.Digest == s.TokenDigest })
		if i < 0 {
			vw.Sessions = append(vw.Sessions, tokenSessions{Digest: s.TokenDigest, Short: s.TokenDigest[:min(12, len(s.TokenDigest))],
				Principal: s.Principal, Role: s.Role})
			i = len(vw.Sessions) - 1
		}
		vw.Sessions[i].Sessions = append(vw.Sessions[i].Sessions, s)
	}
	charts, err := c.chartsFor(ctx, r, true)
	if err != nil {
		return err
	}
	vw.Charts = charts
	c.render(w, r, v, http.StatusOK, "health", "Health", "health", vw)
	return nil
}
