package harness

import (
	"context"
	"sync"
	"time"
)

// Timers is a manual time.After: every call registers a waiter that fires
// only when the owner calls Fire. Scenarios use it to decide exactly when a
// lease renewal or a client back-off ends, without sleeping.
type Timers struct {
	mu      sync.Mutex
	waiters []chan time.Time
	armed   chan struct{} // signalled (coalesced) whenever a waiter is added
}

// NewTimers returns timers with no waiters.
func NewTimers() *Timers { return &Timers{armed: make(chan struct{}, 1)} }

// After implements the time.After signature.
func (t *Timers) After(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	t.mu.Lock()
	t.waiters = append(t.waiters, ch)
	t.mu.Unlock()
	select {
	case t.armed <- struct{}{}:
	default:
	}
	return ch
}

// Fire releases every waiter registered so far and returns how many.
func (t *Timers) Fire() int {
	t.mu.Lock()
	w := t.waiters
	t.waiters = nil
	t.mu.Unlock()
	for _, ch := range w {
		ch <- time.Time{}
	}
	return len(w)
}

// Pending returns how many waiters are registered.
func (t *Timers) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.waiters)
}

// WaitPending blocks until at least n waiters are registered or ctx ends.
func (t *Timers) WaitPending(ctx context.Context, n int) error {
	for t.Pending() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.armed:
		}
	}
	return nil
}
