package regression

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// maxRecent bounds the unacknowledged regressions a Monitor keeps to show
// (the newest); every one is counted.
const maxRecent = 20

// readPage is how many events of the regression stream one read takes.
const readPage = 500

// ErrNothingToAcknowledge is returned by Acknowledge when every recorded
// regression is acknowledged already.
var ErrNothingToAcknowledge = errors.New("regression: no unacknowledged log regression")

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	Store  eventstore.Store // required
	Clock  clock.Clock      // default clock.System
	Logger *slog.Logger     // default slog.Default()
	// Regressions is told when the regression stream itself went back
	// (default: nothing more than the monitor's own re-read).
	Regressions eventstore.RegressionObserver
}

// Recorded is one LogRegressed as the stream holds it.
type Recorded struct {
	Version int64  `json:"version"`
	EventID string `json:"event_id"`
	domain.LogRegressed
}

// Status is what the regression stream says: whether a regression is
// recorded that no operator acknowledged.
type Status struct {
	// Unacknowledged counts the LogRegressed events after the last
	// acknowledgement; Recent are the newest of them (at most 20), newest
	// first. Through is the version of the newest LogRegressed: what an
	// acknowledgement now covers.
	Unacknowledged int64      `json:"unacknowledged"`
	Recent         []Recorded `json:"recent"`
	Through        int64      `json:"through"`
	// Total counts every LogRegressed the stream holds.
	Total int64 `json:"total"`
	// LastAcknowledged is the latest acknowledgement, if any.
	LastAcknowledged *domain.LogRegressionAcknowledged `json:"last_acknowledged,omitempty"`
	// Checked is when the stream was last read; Error the last read's
	// failure, if it failed.
	Checked time.Time `json:"checked"`
	Error   string    `json:"error,omitempty"`
}

// Alarm reports whether a regression waits for an operator.
func (s Status) Alarm() bool { return s.Unacknowledged > 0 }

// Summary says the alarm in one line ("" when there is none).
func (s Status) Summary() string {
	if !s.Alarm() {
		return ""
	}
	r := s.Recent[0]
	return fmt.Sprintf("log regression unacknowledged: %d recorded since the last acknowledgement, the latest by %s's %s (%s went back to version %d from %d) at %s; "+
		"lost effects are escalated: acknowledge with POST /v1/regressions/acknowledge or opledger regressions ack",
		s.Unacknowledged, r.Noticer, r.Cache, cmpOr(r.Stream, "the log"), r.HeldVersion, r.SeenVersion, r.NoticedAt.UTC().Format(time.RFC3339))
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

// Monitor follows domain.RegressionStream and knows whether a recorded
// regression is unacknowledged. Refresh reads what was appended since
// the last read (from the last event read, which the stream must still
// hold: the stream can go back too); Status answers from memory. Safe for
// concurrent use.
type Monitor struct {
	cfg MonitorConfig

	readMu sync.Mutex // one Refresh at a time
	mu     sync.Mutex
	// version and anchor are the last event read.
	version int64
	anchor  string
	st      Status
	// unacked are the unacknowledged regressions, newest last (bounded).
	unacked []Recorded
}

// NewMonitor validates cfg; the monitor has read nothing yet.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if cfg.Store == nil {
		return nil, errors.New("regression: monitor: Store is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Regressions == nil {
		cfg.Regressions = eventstore.RegressionObserverFunc(func(context.Context, eventstore.Regression) {})
	}
	return &Monitor{cfg: cfg, version: eventstore.NoStreamVersion, st: Status{Through: eventstore.NoStreamVersion}}, nil
}

// Status is what the last Refresh found.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.st
	s.Recent = make([]Recorded, 0, len(m.unacked))
	for i := len(m.unacked) - 1; i >= 0; i-- {
		s.Recent = append(s.Recent, m.unacked[i])
	}
	return s
}

// Refresh reads the regression stream's events after the last one read.
// If the stream no longer holds that event, it went back too: the monitor
// says so (Regressions, cache domain.CacheRegressionStream) and reads it
// again from its start.
func (m *Monitor) Refresh(ctx context.Context) error {
	m.readMu.Lock()
	defer m.readMu.Unlock()
	err := m.refresh(ctx)
	m.mu.Lock()
	m.st.Checked, m.st.Error = m.cfg.Clock.Now(), ""
	if err != nil {
		m.st.Error = err.Error()
	}
	m.mu.Unlock()
	return err
}

func (m *Monitor) refresh(ctx context.Context) error {
	before := m.Status().Total
	defer func() { m.tell(ctx, before) }()
	for pages := 0; ; pages++ {
		if pages > maxPages {
			return fmt.Errorf("read %s: more than %d pages: refusing to read on", domain.RegressionStream, maxPages)
		}
		from, anchored := m.version+1, m.anchor != ""
		if anchored {
			from--
		}
		page, err := m.cfg.Store.ReadStream(ctx, domain.RegressionStream, from, readPage)
		if err != nil {
			return fmt.Errorf("read %s: %w", domain.RegressionStream, err)
		}
		full := len(page) == readPage
		if anchored {
			if len(page) == 0 || page[0].Version != m.version || page[0].ID != m.anchor {
				m.wentBack(ctx, page)
				continue
			}
			page = page[1:]
		}
		for i := range page {
			if err := m.apply(&page[i]); err != nil {
				return err
			}
		}
		if !full {
			return nil
		}
	}
}

// tell logs, as an error, the regressions read since the stream held
// before of them: every process that follows the stream says so, not only
// the one whose cache noticed it.
func (m *Monitor) tell(ctx context.Context, before int64) {
	st := m.Status()
	if st.Total <= before || len(st.Recent) == 0 {
		return
	}
	last := st.Recent[0]
	m.cfg.Logger.ErrorContext(ctx, "LOG REGRESSION recorded: the store lost writes it had acknowledged; unacknowledged until an operator acknowledges them (opledger regressions ack)",
		"new", st.Total-before, "unacknowledged", st.Unacknowledged, "latest_noticer", last.Noticer, "latest_cache", last.Cache, "latest_stream", last.Stream)
}

// maxPages bounds one Refresh: the recorders' bounds keep the stream far
// shorter than maxPages*readPage events.
const maxPages = 10_000

// wentBack resets the monitor after the stream lost what it had read.
func (m *Monitor) wentBack(ctx context.Context, page []eventstore.RecordedEvent) {
	r := eventstore.Regression{Cache: domain.CacheRegressionStream, Stream: domain.RegressionStream, SeenVersion: m.version,
		SeenEventID: m.anchor, HeldVersion: eventstore.NoStreamVersion, Detail: "the regression stream no longer holds the last event its monitor read"}
	if len(page) > 0 && page[0].Version == m.version {
		r.HeldEventID = page[0].ID
	}
	m.mu.Lock()
	m.version, m.anchor, m.unacked = eventstore.NoStreamVersion, "", nil
	m.st = Status{Through: eventstore.NoStreamVersion}
	m.mu.Unlock()
	m.cfg.Regressions.ObserveRegression(ctx, r)
}

// apply folds one event of the stream.
func (m *Monitor) apply(rec *eventstore.RecordedEvent) error {
	d, err := codec.DecodeRecorded(*rec)
	if err != nil {
		return fmt.Errorf("%s@%d: %w", domain.RegressionStream, rec.Version, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version, m.anchor = rec.Version, rec.ID
	switch ev := d.Event.(type) {
	case domain.LogRegressed:
		m.st.Total++
		m.st.Unacknowledged++
		m.st.Through = rec.Version
		m.unacked = append(m.unacked, Recorded{Version: rec.Version, EventID: rec.ID, LogRegressed: ev})
		if len(m.unacked) > maxRecent {
			m.unacked = m.unacked[len(m.unacked)-maxRecent:]
		}
	case domain.LogRegressionAcknowledged:
		a := ev
		m.st.LastAcknowledged = &a
		var left []Recorded
		for _, r := range m.unacked {
			if r.Version > ev.Through {
				left = append(left, r)
			}
		}
		m.unacked = left
		// Acknowledge appends at the version it read, so an acknowledgement
		// covers every regression before it; one that says otherwise
		// leaves those after its Through unacknowledged (as far as they are
		// kept in memory).
		m.st.Unacknowledged = int64(len(left))
	default:
		return fmt.Errorf("%s@%d holds a %s: only LogRegressed and LogRegressionAcknowledged belong there", domain.RegressionStream, rec.Version, rec.Type)
	}
	return nil
}

// Acknowledge records that operator (an authenticated operator's name)
// has seen every regression recorded so far, with a note saying what was
// done (the provider checked, the escalations read). It reads the stream
// first and appends at the version it read, so it covers exactly what the
// operator was shown; a regression recorded meanwhile makes it read again
// and cover that too. ErrNothingToAcknowledge when none is unacknowledged;
// a *domain.Refusal naming the field for a bad operator or note.
func (m *Monitor) Acknowledge(ctx context.Context, operator, note string) (domain.LogRegressionAcknowledged, error) {
	if r := domain.CheckText("operator", operator, domain.MaxIDLength, true); r != nil {
		return domain.LogRegressionAcknowledged{}, r
	}
	if r := domain.CheckText("note", note, domain.MaxTextLength, true); r != nil {
		return domain.LogRegressionAcknowledged{}, r
	}
	const maxTries = 5 // each conflict means a regression was recorded meanwhile: read it and cover it
	for range maxTries {
		if err := m.Refresh(ctx); err != nil {
			return domain.LogRegressionAcknowledged{}, err
		}
		m.mu.Lock()
		st, version := m.st, m.version
		m.mu.Unlock()
		if st.Unacknowledged == 0 {
			return domain.LogRegressionAcknowledged{}, ErrNothingToAcknowledge
		}
		now := m.cfg.Clock.Now()
		ack := domain.LogRegressionAcknowledged{Through: st.Through, Regressions: st.Unacknowledged, Operator: operator, Note: note, AcknowledgedAt: now}
		data, err := codec.EncodeEvent(ledger.NewID(""), ack, domain.Metadata{Actor: operator, RecordedAt: now})
		if err != nil {
			return domain.LogRegressionAcknowledged{}, err
		}
		_, err = m.cfg.Store.Append(ctx, domain.RegressionStream, eventstore.Exact(version), []eventstore.EventData{data})
		if errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			continue
		}
		if err != nil {
			return domain.LogRegressionAcknowledged{}, fmt.Errorf("acknowledge: %w", err)
		}
		m.cfg.Logger.WarnContext(ctx, "log regressions acknowledged", "operator", operator, "regressions", ack.Regressions, "through", ack.Through, "note", note)
		return ack, m.Refresh(ctx)
	}
	return domain.LogRegressionAcknowledged{}, fmt.Errorf("acknowledge: regressions kept being recorded (%d tries): try again", maxTries)
}

// Run refreshes every interval, and at once when wake fires (a
// regression this process noticed; nil: never), until ctx ends. A failed
// read is logged and kept in Status.Error; the next one tries again.
func (m *Monitor) Run(ctx context.Context, interval time.Duration, wake func() <-chan struct{}) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.WarnContext(ctx, "regression monitor: reading the regression stream failed; retrying", "err", err)
		}
		var woken <-chan struct{}
		if wake != nil {
			woken = wake()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-woken:
		}
	}
}
