package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

// progressEvery bounds how often a progress line is redrawn.
const progressEvery = 250 * time.Millisecond

// terminal is implemented by writers that say whether they are a terminal
// (tests use it to see the progress a person would).
type terminal interface{ Terminal() bool }

// isTerminal reports whether w is a terminal: a character device, or a
// writer that says so. A pipe or a file is not.
func isTerminal(w io.Writer) bool {
	if t, ok := w.(terminal); ok {
		return t.Terminal()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress draws one line on a terminal for a long command: how many items
// are done, how many per second, and, when the end is known, how far along
// and the estimated time left. Its methods do nothing on a nil *progress,
// which is what newProgress returns when w is not a terminal, so a piped
// command prints nothing of it. Safe for concurrent use.
type progress struct {
	w     io.Writer
	label string // what is counted: "events", "dead letters"
	now   func() time.Time

	mu    sync.Mutex
	start time.Time
	drawn time.Time
	done  int64
	// Through a position: from, at and to are ordinals (the PostgreSQL
	// store's global positions) of where the walk began, where it is and
	// where it ends; 0 when unknown.
	from, at, to int64
	total        int64 // when counting items: how many there are (0: unknown)
	width        int   // of the last line drawn, to blank it out
}

// newProgress returns a progress line on w, or nil when w is not a
// terminal.
func newProgress(w io.Writer, label string) *progress {
	if !isTerminal(w) {
		return nil
	}
	return &progress{w: w, label: label, now: time.Now, start: time.Now()}
}

// setTotal says how many items there are.
func (p *progress) setTotal(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.total = n
	p.mu.Unlock()
}

// add counts n more items done, the last at position pos (nil: no
// position), and redraws at most every progressEvery.
func (p *progress) add(n int, pos eventstore.Position) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n)
	if o, ok := ordinal(pos); ok {
		if p.from == 0 {
			p.from = o - int64(n)
		}
		p.at = o
	}
	if now := p.now(); now.Sub(p.drawn) >= progressEvery {
		p.drawn = now
		p.draw(false)
	}
}

// finish draws the final line and ends it.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(true)
}

// draw writes the line over the previous one (a carriage return, no line
// feed until the end).
func (p *progress) draw(final bool) {
	elapsed := p.now().Sub(p.start)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(p.done) / s
	}
	line := fmt.Sprintf("%s %s · %s/s", thousands(p.done), p.label, thousands(int64(rate)))
	var frac float64 = -1
	switch {
	case p.total > 0:
		frac = float64(p.done) / float64(p.total)
	case p.to > p.from && p.at > 0:
		frac = float64(p.at-p.from) / float64(p.to-p.from)
	}
	if frac >= 0 {
		frac = min(frac, 1)
		line += fmt.Sprintf(" · %d%%", int(frac*100))
		if !final && frac > 0 {
			left := time.Duration(float64(elapsed) * (1 - frac) / frac)
			line += " · ETA " + left.Round(time.Second).String()
		}
	}
	if final {
		line += " · done in " + elapsed.Round(time.Millisecond).String()
	}
	pad := max(0, p.width-len(line))
	p.width = len(line)
	end := ""
	if final {
		end = "\n"
	}
	_, _ = fmt.Fprintf(p.w, "\r%s%*s%s", line, pad, "", end) // a terminal: a failed write only loses the line
}

// thousands renders n with thin separators: 1234567 reads "1,234,567".
func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ordinal is where a position sits in the log as a number, for estimating
// how far a walk has come: the PostgreSQL store's global position. Other
// backends have none (their progress shows counts and rates, no ETA).
func ordinal(pos eventstore.Position) (int64, bool) {
	if p, ok := pos.(postgres.Position); ok && p.GlobalPosition > 0 {
		return p.GlobalPosition, true
	}
	return 0, false
}

// withProgress wraps store so that every ReadAll counts its events on p,
// and sets p's end to the log's head (or to, when given). With a nil p it
// returns store itself. The wrapper keeps the optional interfaces store has
// (Head, which the projections' rebuild and lag read, and
// eventstore.HeadReader, which verify's chain check reads), and no other.
func withProgress(ctx context.Context, store eventstore.Store, p *progress, to eventstore.Position) eventstore.Store {
	if p == nil {
		return store
	}
	end := to
	h, hasHead := store.(eventstore.Header)
	if end == nil && hasHead {
		if head, err := h.Head(ctx); err == nil {
			end = head
		}
	}
	if o, ok := ordinal(end); ok {
		p.mu.Lock()
		p.to = o
		p.mu.Unlock()
	}
	counted := &countingStore{Store: store, p: p}
	hr, hasHeads := store.(eventstore.HeadReader)
	switch {
	case hasHead && hasHeads:
		return struct {
			*countingStore
			eventstore.Header
			eventstore.HeadReader
		}{counted, h, hr}
	case hasHead:
		return struct {
			*countingStore
			eventstore.Header
		}{counted, h}
	case hasHeads:
		return struct {
			*countingStore
			eventstore.HeadReader
		}{counted, hr}
	}
	return counted
}

// countingStore counts what ReadAll returns.
type countingStore struct {
	eventstore.Store
	p *progress
}

func (s *countingStore) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	events, err := s.Store.ReadAll(ctx, after, limit)
	if len(events) > 0 {
		s.p.add(len(events), events[len(events)-1].Position)
	}
	return events, err
}
