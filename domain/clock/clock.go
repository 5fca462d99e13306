// Package clock supplies the time to opledger's roles. Nothing in domain/
// reads the wall clock directly: a Clock is injected, so tests and the
// `--test-clock` mode can move time deliberately.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the wall clock, in UTC.
type System struct{}

// Now implements Clock.
func (System) Now() time.Time { return time.Now().UTC() }

// Manual is a clock that only moves when told to. Safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a clock standing at start.
func NewManual(start time.Time) *Manual { return &Manual{now: start.UTC()} }

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (d < 0 is ignored: time never runs
// backwards) and returns the new time.
func (m *Manual) Advance(d time.Duration) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.now = m.now.Add(d)
	}
	return m.now
}

// Offset is a clock running at the wall clock's pace from an adjustable
// offset: what `serve --test-clock` uses so that expiry can be reached from
// outside while tickers still run on real time.
type Offset struct {
	mu     sync.Mutex
	base   Clock
	offset time.Duration
}

// NewOffset returns a clock equal to base until advanced.
func NewOffset(base Clock) *Offset { return &Offset{base: base} }

// Now implements Clock.
func (o *Offset) Now() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.base.Now().Add(o.offset)
}

// Advance moves the clock forward by d (d < 0 is ignored) and returns the new time.
func (o *Offset) Advance(d time.Duration) time.Time {
	o.mu.Lock()
	if d > 0 {
		o.offset += d
	}
	o.mu.Unlock()
	return o.Now()
}
