package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"opledger/adapters/httpapi"
	"opledger/domain/clock"
)

// Supervision of serve's background roles. A role that returns while serve
// runs — with an error, without one, or by panicking — is restarted after a
// backoff that doubles from minBackoff up to maxBackoff. A run that lasted
// stableAfter or longer starts the count again. A role that fails
// maxFailures times in a row is not restarted: serve shuts down (letting
// requests in flight finish) and exits 1, so that a role never dies
// silently and a crash loop becomes the process manager's and the
// operator's concern. While a role waits to restart, /readyz is 503 and
// names it.
const (
	defaultRoleMinBackoff  = time.Second
	defaultRoleMaxBackoff  = 30 * time.Second
	defaultRoleMaxFailures = 5
	defaultRoleStableAfter = time.Minute
)

// role is one background role of serve.
type role struct {
	name string
	// run works until ctx ends; it may be called again after it returned.
	run func(ctx context.Context) error
	// health, optional, says whether a running role can do its work (the
	// relay reaches its brokers, the projector is not stalled).
	health func(ctx context.Context) error
	// close, optional, releases what the role holds, after its last run.
	close func()
}

type superviseConfig struct {
	MinBackoff, MaxBackoff time.Duration
	MaxFailures            int
	StableAfter            time.Duration
	Clock                  clock.Clock
	// Wait pauses for d or until ctx ends (false); tests replace it.
	Wait   func(ctx context.Context, d time.Duration) bool
	Logger *slog.Logger
}

func (c *superviseConfig) setDefaults() {
	c.MinBackoff = cmp.Or(c.MinBackoff, defaultRoleMinBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, max(defaultRoleMaxBackoff, c.MinBackoff))
	c.MaxFailures = cmp.Or(c.MaxFailures, defaultRoleMaxFailures)
	c.StableAfter = cmp.Or(c.StableAfter, defaultRoleStableAfter)
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Wait == nil {
		c.Wait = clock.Sleep
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// roleState is what the supervisor knows of one role.
type roleState struct {
	role
	state     string
	since     time.Time
	restarts  int
	lastError string
}

// supervisor runs roles and reports their states. Safe for concurrent use.
type supervisor struct {
	cfg    superviseConfig
	mu     sync.Mutex
	order  []string // every role of serve, enabled or not, in report order
	states map[string]*roleState
	failed chan error // the first role past its bound; buffered 1
	wg     sync.WaitGroup
}

// newSupervisor returns a supervisor reporting every name of all (those not
// started are disabled).
func newSupervisor(cfg superviseConfig, all []string) *supervisor {
	cfg.setDefaults()
	s := &supervisor{cfg: cfg, order: all, states: map[string]*roleState{}, failed: make(chan error, 1)}
	return s
}

// start runs each role in its own goroutine until ctx ends.
func (s *supervisor) start(ctx context.Context, roles []role) {
	for _, r := range roles {
		s.mu.Lock()
		st := &roleState{role: r, state: httpapi.RoleStarting, since: s.cfg.Clock.Now()}
		s.states[r.name] = st
		found := false
		for _, n := range s.order {
			found = found || n == r.name
		}
		if !found {
			s.order = append(s.order, r.name)
		}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.supervise(ctx, st)
		}()
	}
}

// failures yields the error of the first role that failed past its bound.
func (s *supervisor) failures() <-chan error { return s.failed }

// wait returns once every role returned (after ctx ended, or failed).
func (s *supervisor) wait() { s.wg.Wait() }

func (s *supervisor) supervise(ctx context.Context, st *roleState) {
	log := s.cfg.Logger.With("role", st.name)
	defer func() {
		if st.close != nil {
			st.close()
		}
	}()
	backoff, failures := s.cfg.MinBackoff, 0
	for {
		s.set(st, httpapi.RoleRunning, "")
		began := s.cfg.Clock.Now()
		err := runGuarded(ctx, st.run)
		if ctx.Err() != nil {
			s.set(st, httpapi.RoleStopped, "")
			return
		}
		if err == nil {
			err = errors.New("returned while serve was running")
		}
		if s.cfg.Clock.Now().Sub(began) >= s.cfg.StableAfter {
			backoff, failures = s.cfg.MinBackoff, 0 // it had been running well
		}
		failures++
		if failures >= s.cfg.MaxFailures {
			s.set(st, httpapi.RoleFailed, err.Error())
			log.Error("role failed too often; stopping serve", "failures", failures, "err", err)
			select {
			case s.failed <- fmt.Errorf("role %s failed %d times in a row, last: %w", st.name, failures, err):
			default: // another role already stops serve
			}
			return
		}
		s.set(st, httpapi.RoleRestarting, err.Error())
		log.Error("role stopped; restarting", "err", err, "failures", failures, "backoff", backoff)
		if !s.cfg.Wait(ctx, backoff) {
			s.set(st, httpapi.RoleStopped, "")
			return
		}
		s.mu.Lock()
		st.restarts++
		s.mu.Unlock()
		backoff = min(backoff*2, s.cfg.MaxBackoff)
	}
}

// runGuarded runs f, turning a panic into an error with its stack.
func runGuarded(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return f(ctx)
}

func (s *supervisor) set(st *roleState, state, lastError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.state != state {
		st.state, st.since = state, s.cfg.Clock.Now()
	}
	if lastError != "" {
		st.lastError = firstLine(lastError)
	}
}

func firstLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// statuses reports every role: its state, and for a running role with a
// health check, whether it can do its work (checked concurrently, within
// ctx).
func (s *supervisor) statuses(ctx context.Context) []httpapi.RoleStatus {
	s.mu.Lock()
	out := make([]httpapi.RoleStatus, len(s.order))
	checks := make([]func(context.Context) error, len(s.order))
	for i, name := range s.order {
		st, found := s.states[name]
		if !found {
			out[i] = httpapi.RoleStatus{Role: name, State: httpapi.RoleDisabled, OK: true}
			continue
		}
		since := st.since
		out[i] = httpapi.RoleStatus{Role: name, State: st.state, Restarts: st.restarts, Since: &since, LastError: st.lastError,
			OK: st.state == httpapi.RoleRunning}
		if st.state == httpapi.RoleRunning {
			checks[i] = st.health
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for i, check := range checks {
		if check == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := check(ctx); err != nil {
				out[i].OK, out[i].Detail = false, err.Error()
			}
		}()
	}
	wg.Wait()
	for i := range out {
		if !out[i].OK && out[i].Detail == "" && out[i].State != httpapi.RoleRunning {
			out[i].Detail = out[i].LastError
		}
	}
	return out
}
