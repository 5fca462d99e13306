package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"opledger/domain"
	"opledger/domain/feed"
	"opledger/domain/ledger"
)

// Server is the HTTP API. It is an http.Handler; safe for concurrent use.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	reads *readModels
	// scrapeMu makes concurrent scrapes refresh the gauges one at a time.
	scrapeMu   sync.Mutex
	exposition http.Handler // the registry in Prometheus's text format
	routes     []Route
	// timeouts bounds the work of each endpoint that takes a token, by
	// its pattern (see handleFor).
	timeouts  map[string]time.Duration
	limiter   *limiter
	feed      *feed.Reader
	feedPolls feedPolls
	// draining is closed when the http.Server shuts down (StopWaiting):
	// long-polls answer at once rather than hold the shutdown up.
	draining  chan struct{}
	drainOnce sync.Once
	// traced is false when Config.Tracing is a no-op provider: no request
	// then pays for a span nobody records (trace.go).
	traced bool
}

// StopWaiting ends every long-poll at once (each answers what it has) and
// every later one at its first read: NewHTTPServer registers it to run on
// Shutdown, which otherwise waits for requests in flight to finish.
func (s *Server) StopWaiting() { s.drainOnce.Do(func() { close(s.draining) }) }

// Route is one endpoint and the roles that may call it (none: no token).
type Route struct {
	Method, Path string
	Roles        []Role
}

// Routes lists every endpoint, in registration order.
func (s *Server) Routes() []Route { return slices.Clone(s.routes) }

// New validates cfg and returns a Server. It does no I/O.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	cfg.RateLimit.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := cfg.RateLimit.validate(); err != nil {
		return nil, err
	}
	reads, err := newReadModels(cfg.ReadModels, cfg.Schema)
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	fr, err := feed.NewReader(feed.ReaderConfig{Store: cfg.Ledger.Store(), Regressions: cfg.Ledger.Regressions()})
	if err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), reads: reads, limiter: newLimiter(cfg.RateLimit), feed: fr, draining: make(chan struct{}),
		timeouts:   map[string]time.Duration{},
		exposition: promhttp.HandlerFor(cfg.Metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})}
	_, untraced := cfg.Tracing.(noop.TracerProvider)
	s.traced = !untraced
	s.register()
	return s, nil
}

// Metrics returns the server's metrics, to hand to the other roles' hooks.
func (s *Server) Metrics() *Metrics { return s.cfg.Metrics }

// everyone may call the reads: every role but a subscriber.
var everyone = Readers

func (s *Server) register() {
	s.handle("POST /v1/operations", []Role{RoleAgent}, s.createOperation)
	s.handle("POST /v1/operations/{id}/decisions", []Role{RoleAgent}, s.decide)
	s.handle("POST /v1/claims", []Role{RoleWorker}, s.claim)
	s.handle("POST /v1/executions/{id}/lease", []Role{RoleWorker}, s.renewLease)
	s.handle("POST /v1/executions/{id}/outcome", []Role{RoleWorker}, s.recordOutcome)
	s.handle("POST /v1/executions/{id}/resolve", []Role{RoleOperator}, s.resolve)
	s.handle("POST /v1/capabilities/{id}/revoke", []Role{RoleOperator}, s.revoke)
	s.handle("POST /v1/test-clock", []Role{RoleOperator}, s.advanceTestClock)
	s.handle("GET /v1/escalations", everyone, s.listEscalations)
	s.handle("GET /v1/operations/{id}", everyone, s.getOperation)
	s.handle("GET /v1/operations/{id}/events", everyone, s.getEvents)
	s.handle("GET /v1/evidence", everyone, s.listEvidence)
	s.handle("GET /v1/set-aside", everyone, s.listSetAside)
	s.handle("POST /v1/set-aside/release", []Role{RoleOperator}, s.releaseSetAside)
	// A long-poll of the feed waits up to MaxFeedWait before its read.
	s.handleFor("GET /v1/feed", []Role{RoleAnalyst, RoleSubscriber}, MaxFeedWait+s.cfg.CommandTimeout, s.getFeed)
	s.handle("GET /v1/regressions", everyone, s.listRegressions)
	s.handle("POST /v1/regressions/acknowledge", []Role{RoleOperator}, s.acknowledgeRegressions)
	s.open("GET /healthz", s.healthz)
	s.open("GET /readyz", s.readyz)
	s.open("GET /metrics", s.metrics)
}

// open registers an endpoint that needs no token.
func (s *Server) open(pattern string, h http.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, Route{Method: method, Path: path})
	s.mux.HandleFunc(pattern, h)
}

// handlerFunc is an endpoint: it answers a reply or an error (see classify).
type handlerFunc func(w http.ResponseWriter, r *http.Request, who Principal) (reply, error)

// handle registers an endpoint that only the given roles may call: no or an
// unknown token is 401, a token over its rate 429, a known token of another
// role 403.
func (s *Server) handle(pattern string, roles []Role, h handlerFunc) {
	s.handleFor(pattern, roles, s.cfg.CommandTimeout, h)
}

// handleFor is handle with a bound of the request's work other than
// CommandTimeout. ServeHTTP sets the bound, with the request's context.
func (s *Server) handleFor(pattern string, roles []Role, timeout time.Duration, h handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.routes = append(s.routes, Route{Method: method, Path: path, Roles: roles})
	s.timeouts[pattern] = timeout
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		info := requestInfoFrom(r.Context())
		token, found := bearer(r.Header.Get("Authorization"))
		if !found {
			writeError(w, &apiError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: "no bearer token: send Authorization: Bearer TOKEN"})
			return
		}
		who, digest, known := s.cfg.Tokens.authenticate(token)
		if !known {
			writeError(w, &apiError{status: http.StatusUnauthorized, code: CodeUnauthenticated, message: "unknown bearer token"})
			return
		}
		info.who, info.token = who, digest
		if allowed, wait := s.limiter.allow(digest); !allowed {
			s.cfg.Metrics.rateLimited.WithLabelValues(string(who.Role)).Inc()
			e := rateLimited(who, wait, s.cfg.RateLimit)
			info.err = e
			writeError(w, e)
			return
		}
		if !slices.Contains(roles, who.Role) {
			writeError(w, &apiError{status: http.StatusForbidden, code: CodeForbidden,
				message: fmt.Sprintf("role %s may not %s %s", who.Role, method, path)})
			return
		}
		annotateSpan(r, who) // trace.go: the route's id and the caller's role
		rep, err := h(w, r, who)
		if err != nil {
			var refusal *domain.Refusal
			if errors.As(err, &refusal) {
				s.cfg.Metrics.ObserveRefusal(refusal.Reason)
			}
			e := classify(err)
			info.err = e
			writeError(w, e)
			return
		}
		if err := writeBody(w, rep.status, rep.header, rep.body); err != nil {
			e := classify(err)
			info.err = e
			writeError(w, e)
		}
	})
}

// ServeHTTP routes r, answering unknown paths (404) and methods (405) in
// JSON too, and logs and counts every request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{id: requestID(r)}
	h, pattern := s.mux.Handler(r)
	ctx := context.WithValue(r.Context(), requestInfoKey{}, info)
	if timeout, ok := s.timeouts[pattern]; ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r = r.WithContext(ctx) // the one copy of the request: its context is all it changes
	rec := &statusRecorder{ResponseWriter: w}
	rec.Header().Set("X-Request-Id", info.id)
	if s.traced {
		var span trace.Span
		r, span = s.startSpan(r, pattern) // trace.go
		defer span.End()
		defer endSpan(span, rec, info)
	}
	if pattern == "" {
		s.notRouted(rec, r, h)
		pattern = "unmatched"
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	s.logRequest(r, rec, info, pattern, time.Since(start))
}

// notRouted lets the mux decide between 404, 405 (with Allow) and a
// redirect, and answers the first two in JSON.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request, h http.Handler) {
	capture := &captureWriter{header: http.Header{}}
	h.ServeHTTP(capture, r)
	switch capture.status {
	case http.StatusNotFound:
		writeError(w, notFound(CodeNotFound, "no endpoint %s: see docs/api.md", r.URL.Path))
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", capture.header.Get("Allow"))
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
			message: fmt.Sprintf("%s does not take %s (allowed: %s)", r.URL.Path, r.Method, capture.header.Get("Allow"))})
	default:
		for k, vs := range capture.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(capture.status)
		_, _ = w.Write(capture.body)
	}
}

// captureWriter keeps what the mux's fallback handlers write (a few bytes).
type captureWriter struct {
	header http.Header
	status int
	body   []byte
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}
func (c *captureWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if len(c.body) < 4096 {
		c.body = append(c.body, p[:min(len(p), 4096-len(c.body))]...)
	}
	return len(p), nil
}

// requestID is the caller's X-Request-Id when it is a sane one, else new.
func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && printable(id) {
		return id
	}
	return ledger.NewID("REQ-")
}
