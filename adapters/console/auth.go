package console

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"opledger/adapters/httpapi"
)

// Why a request has no session.
var (
	errNoSession      = errors.New("no session cookie")
	errSessionExpired = errors.New("session expired")
	errTokenRevoked   = errors.New("the session's token is no longer known")
	errSessionEnded   = errors.New("the session was ended")
)

// rateLimited is a request over its token's rate: 429, as the API answers.
type rateLimited struct{ wait time.Duration }

func (e *rateLimited) Error() string { return "over the token's rate" }

// sessionsUnavailable is a session store that cannot be read: 503, the
// cookie kept (an outage signs nobody out, and lets nobody in).
type sessionsUnavailable struct{ err error }

func (e *sessionsUnavailable) Error() string { return e.err.Error() }

// visitor opens r's session cookie and authenticates its token again, so a
// token removed from the tokens file (or given another role) takes effect
// on the next request; counts the request against the token's rate; and
// asks the session store whether the session is still open, so a sign-out
// on any instance ends it.
func (c *Console) visitor(r *http.Request) (*visit, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return nil, errNoSession
	}
	var s session
	if err := c.seal.open(sessionCookie, ck.Value, &s); err != nil || s.Version != 1 || s.ID == "" {
		return nil, errCookieRefused
	}
	now := c.cfg.Now()
	if now.Unix() >= s.Expires {
		return nil, errSessionExpired
	}
	who, known := c.cfg.Tokens.Authenticate(s.Token)
	if !known || !mayRead(who.Role) {
		return nil, errTokenRevoked
	}
	if err := c.takeRate(s.Token); err != nil {
		return nil, err
	}
	active, err := c.cfg.Sessions.Active(r.Context(), s.ID, now)
	if err != nil {
		return nil, &sessionsUnavailable{err: err}
	}
	if !active {
		return nil, errSessionEnded
	}
	return &visit{who: who, sess: s, csrf: c.seal.csrf("session", s.ID)}, nil
}

// takeRate counts one request of token against its rate (the API's
// per-token limit, shared with it).
func (c *Console) takeRate(token string) error {
	if c.cfg.RateLimit == nil {
		return nil
	}
	if ok, wait := c.cfg.RateLimit(token); !ok {
		return &rateLimited{wait: wait}
	}
	return nil
}

// refuseSession answers a request whose session cookie cannot be used: the
// cookie is cleared and the visitor asked to sign in again (401).
func (c *Console) refuseSession(w http.ResponseWriter, r *http.Request, err error) {
	var limited *rateLimited
	var down *sessionsUnavailable
	switch {
	case errors.As(err, &limited):
		w.Header().Set("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(limited.wait.Seconds()))), 10))
		c.fail(w, r, nil, http.StatusTooManyRequests, "Too many requests",
			"This token is over its rate (the API's per-token limit, which the console's requests count against). Wait a moment and retry.")
		return
	case errors.As(err, &down):
		c.cfg.Logger.ErrorContext(r.Context(), "console: the session store cannot be read", "err", down.err)
		c.fail(w, r, nil, http.StatusServiceUnavailable, "Unavailable", "The sessions cannot be checked (the database is unreachable). Retry.")
		return
	}
	c.clearCookie(w, r, sessionCookie)
	msg := "You are not signed in. Sign in with your role's bearer token."
	switch {
	case errors.Is(err, errCookieRefused):
		msg = "The session cookie was refused: this console did not issue it, or it was altered. Sign in again."
		c.cfg.Logger.WarnContext(r.Context(), "console: session cookie refused (forged, altered, or sealed by another key)", "path", r.URL.Path)
	case errors.Is(err, errSessionExpired):
		msg = "Your session has expired. Sign in again."
	case errors.Is(err, errTokenRevoked):
		msg = "The token this session was opened with is no longer accepted. Sign in with a current one."
	case errors.Is(err, errSessionEnded):
		msg = "This session was ended (signed out, or ended by an operator). Sign in again."
		c.cfg.Logger.WarnContext(r.Context(), "console: a cookie of an ended session refused", "path", r.URL.Path)
	}
	c.fail(w, r, nil, http.StatusUnauthorized, "Session refused", msg)
}

// secure reports whether cookies must be Secure for r.
func (c *Console) secure(r *http.Request) bool { return c.cfg.SecureCookies || r.TLS != nil }

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/ui/", MaxAge: int(ttl.Seconds()),
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: c.secure(r), SameSite: http.SameSiteStrictMode})
}

type signinView struct {
	CSRF  string
	Next  string
	Error string
}

// signinForm: GET /ui/signin?next=, the form to paste a bearer token into.
// It sets the sign-in cookie whose nonce the form's CSRF token is bound to.
func (c *Console) signinForm(w http.ResponseWriter, r *http.Request) {
	c.signinPage(w, r, http.StatusOK, r.URL.Query().Get("next"), "")
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request, status int, next, problem string) {
	nonce, err := randomID()
	if err != nil {
		c.error(w, r, nil, err)
		return
	}
	sealed, err := c.seal.seal(signinCookie, signin{Nonce: nonce, Expires: c.cfg.Now().Add(signinTTL).Unix()})
	if err != nil {
		c.error(w, r, nil, err)
		return
	}
	c.setCookie(w, r, signinCookie, sealed, signinTTL)
	if !localPath(next) {
		next = "/ui/operations"
	}
	c.render(w, r, nil, status, "signin", "Sign in", "", signinView{CSRF: c.seal.csrf("signin", nonce), Next: next, Error: problem})
}

// signinSubmit: POST /ui/signin {csrf, token, next}. A known token opens a
// session (303 to next); an unknown one is 401 with the form again. The
// token is never logged.
func (c *Console) signinSubmit(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		c.fail(w, r, nil, http.StatusForbidden, "Refused", "This form was sent from another site; the console only takes its own forms.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, nil, http.StatusBadRequest, "Refused", "The form could not be read: "+err.Error())
		return
	}
	next := r.PostForm.Get("next")
	var pre signin
	ck, err := r.Cookie(signinCookie)
	if err != nil || c.seal.open(signinCookie, ck.Value, &pre) != nil || c.cfg.Now().Unix() >= pre.Expires ||
		!c.seal.checkCSRF("signin", pre.Nonce, r.PostForm.Get("csrf")) {
		c.cfg.Logger.WarnContext(r.Context(), "console: sign-in without a valid CSRF token refused")
		c.signinPage(w, r, http.StatusForbidden, next, "The sign-in form was stale or not this console's (CSRF token missing or wrong). Paste the token again.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	who, known := c.cfg.Tokens.Authenticate(token)
	if token == "" || !known || !mayRead(who.Role) {
		c.cfg.Logger.WarnContext(r.Context(), "console: sign-in with an unknown token refused", "remote", r.RemoteAddr)
		c.signinPage(w, r, http.StatusUnauthorized, next, "That token is not known to this server.")
		return
	}
	if err := c.takeRate(token); err != nil {
		c.refuseSession(w, r, err)
		return
	}
	id, err := randomID()
	if err != nil {
		c.error(w, r, nil, err)
		return
	}
	now := c.cfg.Now()
	sealed, err := c.seal.seal(sessionCookie, session{Version: 1, Token: token, ID: id, IssuedAt: now.Unix(), Expires: now.Add(c.cfg.SessionTTL).Unix()})
	if err != nil {
		c.error(w, r, nil, err)
		return
	}
	if err := c.cfg.Sessions.Open(r.Context(), SessionRecord{ID: id, TokenDigest: tokenDigest(token), Principal: who.Name, Role: string(who.Role),
		IssuedAt: time.Unix(now.Unix(), 0).UTC(), ExpiresAt: time.Unix(now.Add(c.cfg.SessionTTL).Unix(), 0).UTC()}); err != nil {
		c.refuseSession(w, r, &sessionsUnavailable{err: err})
		return
	}
	c.clearCookie(w, r, signinCookie)
	c.setCookie(w, r, sessionCookie, sealed, c.cfg.SessionTTL)
	c.cfg.Logger.InfoContext(r.Context(), "console: signed in", "role", who.Role, "actor", who.Name, "session", id[:8])
	redirectBack(w, r, next, "/ui/operations")
}

// signout: POST /ui/signout {csrf}: the session is ended in the store (on
// every instance: a copy of the cookie is refused after) and its cookie
// cleared.
func (c *Console) signout(w http.ResponseWriter, r *http.Request, v *visit) error {
	if err := c.cfg.Sessions.End(r.Context(), v.sess.ID, v.who.Name, c.cfg.Now()); err != nil {
		return err
	}
	c.clearCookie(w, r, sessionCookie)
	c.cfg.Logger.InfoContext(r.Context(), "console: signed out", "role", v.who.Role, "actor", v.who.Name, "session", v.sess.ID[:8])
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
	return nil
}

// setFlash keeps text for the next page the visitor sees.
func (c *Console) setFlash(w http.ResponseWriter, r *http.Request, text string) {
	sealed, err := c.seal.seal(flashCookie, flash{Text: text, Expires: c.cfg.Now().Add(flashTTL).Unix()})
	if err != nil {
		c.cfg.Logger.WarnContext(r.Context(), "console: flash not kept", "err", err)
		return
	}
	c.setCookie(w, r, flashCookie, sealed, flashTTL)
}

// takeFlash returns the flash waiting for this visitor, once.
func (c *Console) takeFlash(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	c.clearCookie(w, r, flashCookie)
	var f flash
	if c.seal.open(flashCookie, ck.Value, &f) != nil || c.cfg.Now().Unix() >= f.Expires {
		return ""
	}
	return f.Text
}

// principalLabel names a visitor in the header.
func principalLabel(who httpapi.Principal) string { return who.Name + " (" + string(who.Role) + ")" }
