package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"opledger/adapters/httpapi"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// fragmentHeader asks for a page's main content only: the live update's
// request (console.js).
const fragmentHeader = "X-Console-Fragment"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// pageNames are the templates/<name>.html files, each defining "main".
var pageNames = []string{"signin", "error", "operations", "operation", "escalations", "evidence", "deadletters", "health"}

// templates holds one parsed set per page: the layout, the partials and the
// page's own "main".
type templates struct {
	sets map[string]*template.Template
}

func loadTemplates() (*templates, error) {
	t := &templates{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		set, err := template.New("layout").Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/partials.html", "templates/charts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: templates of %s: %w", name, err)
		}
		t.sets[name] = set
	}
	return t, nil
}

// staticHandler serves the embedded stylesheet and script.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory: a build bug
	}
	files := http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// view is what every page's template gets.
type view struct {
	Title    string
	Nav      string // the navigation entry to mark current
	Who      *httpapi.Principal
	WhoLabel string
	CSRF     string
	Flash    string
	// Refresh is how often (seconds) the page asks whether it changed; 0:
	// never (forms, errors, sign-in).
	Refresh  int
	Operator bool
	Now      time.Time // the ledger's
	Path     string    // the request's path and query, for forms' "back"
	Data     any
}

// render writes page with data: the whole document, or only its main
// content for a live update (with an ETag, 304 when unchanged).
func (c *Console) render(w http.ResponseWriter, r *http.Request, v *visit, status int, page, title, nav string, data any) {
	vw := view{Title: title, Nav: nav, Now: c.ledgerNow(), Path: r.URL.RequestURI(), Data: data}
	if v != nil {
		who := v.who
		vw.Who, vw.WhoLabel, vw.CSRF, vw.Flash = &who, principalLabel(who), v.csrf, v.flash
		vw.Operator = who.Role == httpapi.RoleOperator
		if status == http.StatusOK && nav != "" {
			vw.Refresh = int(c.cfg.Refresh / time.Second)
		}
	}
	set, ok := c.pages.sets[page]
	if !ok {
		panic("console: no template " + page) // a build bug
	}
	fragment := v != nil && v.fragment
	name := "layout"
	if fragment {
		name = "main"
	}
	var b bytes.Buffer
	if err := set.ExecuteTemplate(&b, name, vw); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "console: render", "page", page, "err", err)
		http.Error(w, "the page could not be rendered; the server log has the cause", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if fragment {
		sum := sha256.Sum256(b.Bytes())
		etag := `"` + hex.EncodeToString(sum[:12]) + `"`
		h.Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes()) // the client went away: nothing to do
}

type errorView struct {
	Status  int
	Heading string
	Message string
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *visit, status int, heading, message string) {
	if v != nil {
		v.fragment = false // an error is always a whole page
	}
	c.render(w, r, v, status, "error", heading, "", errorView{Status: status, Heading: heading, Message: message})
}

// pageError is a handler's answer that is not the page it renders.
type pageError struct {
	status           int
	heading, message string
}

func (e *pageError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.heading, e.message) }

func notFound(format string, args ...any) error {
	return &pageError{status: http.StatusNotFound, heading: "Not found", message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &pageError{status: http.StatusBadRequest, heading: "Refused", message: fmt.Sprintf(format, args...)}
}

// error renders err as the page it stands for, as the API classifies it:
// a ledger refusal is 409 naming its reason (400 for an invalid command),
// the store or read models out of reach 503, anything else 500 (logged,
// never shown).
func (c *Console) error(w http.ResponseWriter, r *http.Request, v *visit, err error) {
	var pe *pageError
	var refusal *domain.Refusal
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		c.fail(w, r, v, pe.status, pe.heading, pe.message)
	case errors.As(err, &refusal):
		status := http.StatusConflict
		if refusal.Reason == domain.ReasonCommandInvalid {
			status = http.StatusBadRequest
		}
		c.fail(w, r, v, status, "Refused by the ledger: "+string(refusal.Reason), refusal.Error()+". Nothing was changed.")
	case errors.Is(err, audit.ErrNoSuchOperation):
		c.fail(w, r, v, http.StatusNotFound, "Not found", "No operation by that id in the event store.")
	case errors.Is(err, eventstore.ErrUnavailable), errors.Is(err, ledger.ErrContention):
		c.fail(w, r, v, http.StatusServiceUnavailable, "Unavailable", "The event store is unreachable or busy; nothing may be assumed about an action just sent. Retry.")
	case errors.As(err, &pgErr):
		c.cfg.Logger.ErrorContext(r.Context(), "console: read models refused a query", "path", r.URL.Path, "err", err)
		c.fail(w, r, v, http.StatusInternalServerError, "Internal error", "The read models cannot be queried (was 'opledger migrate' run?); the server log has the cause.")
	case errors.Is(err, ledger.ErrCorruptStream):
		c.fail(w, r, v, http.StatusInternalServerError, "Corrupt stream", "The operation's stream cannot be read as a valid history; run 'opledger audit verify'.")
	case r.Context().Err() != nil:
		c.fail(w, r, v, http.StatusServiceUnavailable, "Unavailable", "The page took too long or the database is unreachable. Retry.")
	default:
		c.cfg.Logger.ErrorContext(r.Context(), "console: page failed", "path", r.URL.Path, "err", err)
		c.fail(w, r, v, http.StatusServiceUnavailable, "Unavailable", "The read models could not be read; the server log has the cause. Retry.")
	}
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"half":       func(n int) int { return n / 2 },
	"expandPage": func() int { return expandPage },
	"money":      domain.FormatMoney,
	"stamp":      stamp,
	"stampp":     func(t *time.Time) string { return stampPtr(t) },
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"ago":        ago,
	"agop": func(now time.Time, t *time.Time) string {
		if t == nil {
			return ""
		}
		return ago(now, *t)
	},
	"str": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"i64p": func(n *int64) string {
		if n == nil {
			return ""
		}
		return fmt.Sprint(*n)
	},
	"deref": func(b *bool) bool { return b != nil && *b },
	"boolp": func(b *bool) string {
		if b == nil {
			return ""
		}
		if *b {
			return "yes"
		}
		return "no"
	},
	"tone": stateTone,
	"deref64": func(n *int64) int64 {
		if n == nil {
			return 0
		}
		return *n
	},
	"formctx": func(csrf, back, id string) formCtx { return formCtx{CSRF: csrf, Back: back, ID: id} },
	"lower":   strings.ToLower,
	"dash": func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	},
}

// formCtx is what a partial form needs: the session's CSRF token, the
// page to come back to, and the id it acts on.
type formCtx struct{ CSRF, Back, ID string }

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("Mon 2006-01-02 15:04:05Z")
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

// ago says how long before now t was, roughly ("3 min ago", "in 2 h").
func ago(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d.Hours()))
	default:
		s = fmt.Sprintf("%d d", int(d.Hours()/24))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// stateTone is the badge colour of a state or status.
func stateTone(state string) string {
	switch state {
	case "Completed", "Claimed", "running", "ok":
		return "ok"
	case "Unknown", "Escalated", "Expired", "restarting", "starting", "DuplicateDelivery":
		return "warn"
	case "Denied", "Revoked", "failed", "AlreadyConsumed", "Invalid", "WriteRefused", "PresentationRejected":
		return "alert"
	}
	return "info"
}
