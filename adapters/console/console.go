package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"opledger/adapters/httpapi"
	"opledger/eventstore"
)

// Console is the auditors' and operators' web console: an http.Handler for
// everything under Prefix. Safe for concurrent use.
type Console struct {
	cfg   Config
	seal  *sealer
	mux   *http.ServeMux
	pages *templates
	// events reads the operations' streams; timelines remembers what the
	// operation pages read of them.
	events    eventstore.Store
	timelines *timelines
}

// New validates cfg and returns the console. It does no I/O.
func New(cfg Config) (*Console, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	key := cfg.SessionKey
	if key == nil {
		var err error
		if key, err = newKey(); err != nil {
			return nil, err
		}
		cfg.Logger.Info("console: sessions sealed with a key of this process: they end when it exits (configure a session key to share them across instances)")
	}
	seal, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	pages, err := loadTemplates()
	if err != nil {
		return nil, err
	}
	events := cfg.Events
	if events == nil {
		events = cfg.Ledger.Store()
	}
	c := &Console{cfg: cfg, seal: seal, mux: http.NewServeMux(), pages: pages, events: events, timelines: newTimelines(events, cfg.Logger)}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	c.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/operations", http.StatusSeeOther)
	})
	c.mux.Handle("GET /ui/static/", staticHandler())
	c.mux.HandleFunc("GET /ui/signin", c.signinForm)
	c.mux.HandleFunc("POST /ui/signin", c.signinSubmit)
	c.mux.HandleFunc("POST /ui/signout", c.form("", c.signout))
	c.mux.HandleFunc("GET /ui/operations", c.page(c.operations))
	c.mux.HandleFunc("GET /ui/operations/{id}", c.page(c.operation))
	c.mux.HandleFunc("GET /ui/operations/{id}/history.json", c.page(c.historyJSON))
	c.mux.HandleFunc("GET /ui/escalations", c.page(c.escalations))
	c.mux.HandleFunc("GET /ui/evidence", c.page(c.evidence))
	c.mux.HandleFunc("GET /ui/dead-letters", c.page(c.deadLetters))
	c.mux.HandleFunc("GET /ui/health", c.page(c.health))
	c.mux.HandleFunc("POST /ui/executions/{id}/resolve", c.form(ActResolve, c.resolve))
	c.mux.HandleFunc("POST /ui/capabilities/{id}/revoke", c.form(ActRevoke, c.revoke))
	c.mux.HandleFunc("POST /ui/dead-letters/resubmit", c.form(ActResubmit, c.resubmit))
	c.mux.HandleFunc("POST /ui/set-aside/release", c.form(ActRelease, c.release))
	c.mux.HandleFunc("POST /ui/sessions/end", c.form(ActEndSessions, c.endSessions))
	c.mux.HandleFunc("POST /ui/regressions/acknowledge", c.form(ActAcknowledge, c.acknowledge))
}

// ServeHTTP sets the console's security headers and routes r.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if _, pattern := c.mux.Handler(r); pattern == "" {
		c.fail(w, r, nil, http.StatusNotFound, "Not found", "There is no console page "+r.URL.Path+".")
		return
	}
	c.mux.ServeHTTP(w, r)
}

// visit is one signed-in request.
type visit struct {
	who  httpapi.Principal
	sess session
	csrf string // the CSRF token of this session's forms
	// fragment: the page's live update asks for its main content only.
	fragment bool
	flash    string
}

// pageFunc renders a page for a signed-in visitor; an error is turned into
// an error page (see c.error).
type pageFunc func(w http.ResponseWriter, r *http.Request, v *visit) error

// formFunc runs an action for a signed-in visitor whose form carried a
// valid CSRF token and whose role may take the action.
type formFunc func(w http.ResponseWriter, r *http.Request, v *visit) error

// page wraps a GET page: a visitor without a session is sent to sign in;
// one whose cookie is refused is told so.
func (c *Console) page(h pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := c.visitor(r)
		if errors.Is(err, errNoSession) {
			http.Redirect(w, r, "/ui/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if err != nil {
			c.refuseSession(w, r, err)
			return
		}
		v.fragment = r.Header.Get(fragmentHeader) == "main"
		if !v.fragment {
			v.flash = c.takeFlash(w, r)
		}
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		if err := h(w, r.WithContext(ctx), v); err != nil {
			c.error(w, r, v, err)
		}
	}
}

// form wraps a POST: it needs a session, a form within maxFormBytes, a
// valid CSRF token and, unless action is "", a role that may take it.
func (c *Console) form(action Action, h formFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			c.cfg.Logger.WarnContext(r.Context(), "console: cross-site form refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"))
			c.fail(w, r, nil, http.StatusForbidden, "Refused", "This form was sent from another site; the console only takes its own forms.")
			return
		}
		v, err := c.visitor(r)
		if err != nil {
			c.refuseSession(w, r, err)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.fail(w, r, v, http.StatusBadRequest, "Refused", "The form could not be read: "+err.Error())
			return
		}
		if !c.seal.checkCSRF("session", v.sess.ID, r.PostForm.Get("csrf")) {
			c.cfg.Logger.WarnContext(r.Context(), "console: form without a valid CSRF token refused", "path", r.URL.Path,
				"role", v.who.Role, "actor", v.who.Name)
			c.fail(w, r, v, http.StatusForbidden, "Refused: CSRF token missing or wrong",
				"The form did not carry this session's CSRF token, so it was not taken. Reload the page and send the form again.")
			return
		}
		if action != "" && !May(v.who.Role, action) {
			c.cfg.Logger.WarnContext(r.Context(), "console: action refused by role", "action", action, "path", r.URL.Path,
				"role", v.who.Role, "actor", v.who.Name)
			c.fail(w, r, v, http.StatusForbidden, "Refused: not allowed for role "+string(v.who.Role),
				fmt.Sprintf("Role %s may not %s: only operators resolve, revoke, resubmit and release. Nothing was changed.", v.who.Role, action))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		if err := h(w, r.WithContext(ctx), v); err != nil {
			c.error(w, r, v, err)
		}
	}
}

// sameOrigin refuses a form a browser says came from another site
// (Sec-Fetch-Site, else Origin); the session cookie is SameSite=Strict and
// every form carries a CSRF token besides.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return origin == ""
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// redirectBack answers an action with 303 to back, when it is a console
// path, else to fallback.
func redirectBack(w http.ResponseWriter, r *http.Request, back, fallback string) {
	if !localPath(back) {
		back = fallback
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// localPath reports whether p is a path of the console (never another
// host: no scheme, no "//", no backslash).
func localPath(p string) bool {
	return strings.HasPrefix(p, Prefix) && !strings.Contains(p, "//") && !strings.ContainsAny(p, "\\\r\n")
}

// ledgerNow is the ledger's time, which the pages' ages are measured by.
func (c *Console) ledgerNow() time.Time { return c.cfg.Ledger.Clock().Now() }
