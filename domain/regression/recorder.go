// Package regression is what a process does when one of its caches or
// cursors finds the store holding less than it had seen (a log that went
// back: a failover to a standby that had not received the last commits).
// The cache itself drops what it remembered and reads again; the
// Recorder here raises the alarm — an error in the log, a counter, and a
// LogRegressed in domain.RegressionStream, bounded — and the Monitor
// reads that stream, so that /readyz, metrics and the console say so in
// every process until an operator acknowledges it.
package regression

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// Defaults of a Recorder's bounds.
const (
	// DefaultMaxRecorded and DefaultWindow bound the LogRegressed events
	// one process appends: after a failover each cache may notice many
	// streams at once, and one event per stream says what was lost, but
	// no failure may make a process write without end. Beyond the bound,
	// regressions are counted and the next event recorded carries the
	// count (Unrecorded).
	DefaultMaxRecorded = 100
	DefaultWindow      = 10 * time.Minute
	// maxPending bounds the records kept while the store cannot be
	// written; beyond, they are counted as unrecorded.
	maxPending = 100
	// maxRemembered bounds the regressions a recorder remembers having
	// recorded (so that two caches noticing one are recorded once); the
	// set is cleared when full.
	maxRemembered = 10_000
)

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Store receives the LogRegressed events (required).
	Store eventstore.Store
	// Noticer names this process in what it records: serve, a worker's id
	// (required).
	Noticer string
	Clock   clock.Clock  // default clock.System
	Logger  *slog.Logger // default slog.Default()
	// OnNoticed is called with the cache's name for every regression
	// noticed, recorded or not (opledger_log_regressions_total{cache}).
	OnNoticed func(cache string)
	// MaxRecorded events per Window (defaults DefaultMaxRecorded,
	// DefaultWindow).
	MaxRecorded int
	Window      time.Duration
}

// Recorder is an eventstore.RegressionObserver: every regression a cache or
// cursor of this process notices is logged as an error (a security
// signal: the store lost acknowledged writes), counted (OnNoticed), and
// recorded as a LogRegressed in domain.RegressionStream, with an event id
// derived from what was seen, so that caches (or processes) that saw the
// same version of a stream go back record it once. It records at the
// caller, on its context: a cache that noticed pays one append, once. An
// append that fails is kept (bounded) and retried by the next notice or
// by Flush. Safe for concurrent use.
type Recorder struct {
	cfg RecorderConfig

	noticed atomic.Uint64 // regressions noticed by this process
	flushMu sync.Mutex    // one Flush at a time: each appends the oldest pending
	mu      sync.Mutex
	wake    chan struct{} // closed and replaced at every notice
	// windowStart and inWindow count the events recorded in the current
	// window; unrecorded the notices beyond the bound (or the pending
	// list) since the last event recorded.
	windowStart time.Time
	inWindow    int
	unrecorded  int64
	pending     []pendingRecord
	recorded    map[string]bool // event ids appended (bounded by maxRemembered)
}

type pendingRecord struct {
	id string
	ev domain.LogRegressed
}

// NewRecorder validates cfg.
func NewRecorder(cfg RecorderConfig) (*Recorder, error) {
	if cfg.Store == nil || cfg.Noticer == "" {
		return nil, errors.New("regression: recorder: Store and Noticer are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnNoticed == nil {
		cfg.OnNoticed = func(string) {}
	}
	cfg.MaxRecorded = cmp.Or(cfg.MaxRecorded, DefaultMaxRecorded)
	cfg.Window = cmp.Or(cfg.Window, DefaultWindow)
	if cfg.MaxRecorded < 1 || cfg.Window <= 0 {
		return nil, errors.New("regression: recorder: MaxRecorded and Window must be positive")
	}
	return &Recorder{cfg: cfg, wake: make(chan struct{}), recorded: map[string]bool{}}, nil
}

// Noticed is how many regressions this process noticed so far.
func (r *Recorder) Noticed() uint64 { return r.noticed.Load() }

// Wake returns a channel closed at the next regression noticed: roles that
// must act on one (the digest tree, the lost-effect check) wait on it.
func (r *Recorder) Wake() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wake
}

// ObserveRegression implements eventstore.RegressionObserver.
func (r *Recorder) ObserveRegression(ctx context.Context, g eventstore.Regression) {
	now := r.cfg.Clock.Now()
	r.cfg.Logger.ErrorContext(ctx, "LOG REGRESSION: the store holds less than this process had seen — acknowledged writes were lost "+
		"(a failover to a standby that had not received them?); the cache dropped what it remembered and read again",
		"cache", g.Cache, "stream", g.Stream, "seen_version", g.SeenVersion, "seen_event_id", g.SeenEventID,
		"held_version", g.HeldVersion, "seen_position", g.SeenPosition, "held_position", g.HeldPosition, "detail", g.Detail)
	r.cfg.OnNoticed(g.Cache)
	r.noticed.Add(1)

	ev := r.event(g, now)
	id := EventID(g)
	r.mu.Lock()
	close(r.wake)
	r.wake = make(chan struct{})
	if r.recorded[id] {
		r.mu.Unlock()
		return // recorded already: another cache of this process saw the same
	}
	if now.Sub(r.windowStart) >= r.cfg.Window {
		r.windowStart, r.inWindow = now, 0
	}
	if r.inWindow >= r.cfg.MaxRecorded || len(r.pending) >= maxPending {
		r.unrecorded++
		r.mu.Unlock()
		return
	}
	r.inWindow++
	r.pending = append(r.pending, pendingRecord{id: id, ev: ev})
	r.mu.Unlock()
	if err := r.Flush(ctx); err != nil {
		r.cfg.Logger.WarnContext(ctx, "log regression noticed but not recorded yet; it is kept and recorded at the next notice or flush", "err", err)
	}
}

// Flush appends the regressions not recorded yet, oldest first, and
// returns the first failure (the rest stay pending).
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	for {
		r.mu.Lock()
		if len(r.pending) == 0 {
			r.mu.Unlock()
			return nil
		}
		p := r.pending[0]
		p.ev.Unrecorded = r.unrecorded
		r.mu.Unlock()
		data, err := codec.EncodeEvent(p.id, p.ev, domain.Metadata{Actor: r.cfg.Noticer, RecordedAt: p.ev.NoticedAt})
		if err != nil {
			return fmt.Errorf("record log regression: %w", err)
		}
		if _, err := r.cfg.Store.Append(ctx, domain.RegressionStream, eventstore.Any(), []eventstore.EventData{data}); err != nil {
			return fmt.Errorf("record log regression: %w", err)
		}
		r.mu.Lock()
		r.pending = r.pending[1:]
		r.unrecorded -= p.ev.Unrecorded
		if len(r.recorded) >= maxRemembered {
			clear(r.recorded)
		}
		r.recorded[p.id] = true
		r.mu.Unlock()
	}
}

// event is the LogRegressed recording g.
func (r *Recorder) event(g eventstore.Regression, now time.Time) domain.LogRegressed {
	ev := domain.LogRegressed{
		Cache: g.Cache, Noticer: r.cfg.Noticer, Stream: g.Stream, SeenVersion: g.SeenVersion, SeenEventID: g.SeenEventID,
		HeldVersion: g.HeldVersion, HeldEventID: g.HeldEventID, SeenPosition: g.SeenPosition, HeldPosition: g.HeldPosition,
		NoticedAt: now,
	}
	ev.Detail, _ = domain.EvidenceText(g.Detail, domain.MaxTextLength)
	if execs, ok := g.Context.([]domain.SeenExecution); ok {
		ev.SeenExecutions = execs[:min(len(execs), domain.MaxSeenExecutions)]
	}
	return ev
}

// regressionNamespace is the UUID namespace of LogRegressed event ids.
var regressionNamespace = uuid.MustParse("8f3e2f0c-6f0a-5d7e-9b1c-4c0f6a1d2e3b")

// EventID is the id of the LogRegressed that records g: derived from what
// was seen (the stream, the version and the event there, or the log's
// position), not from who saw it, so that every cache and process that
// saw the same go back records one event.
func EventID(g eventstore.Regression) string {
	key := g.Stream + "\x00" + strconv.FormatInt(g.SeenVersion, 10) + "\x00" + g.SeenEventID + "\x00" + g.SeenPosition
	return uuid.NewSHA1(regressionNamespace, []byte(key)).String()
}

var _ eventstore.RegressionObserver = (*Recorder)(nil)
