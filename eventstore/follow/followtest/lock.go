// Package followtest holds test doubles for followers.
package followtest

import (
	"context"
	"sync"

	"opledger/eventstore/follow"
)

// Lock is an in-process stand-in for a lock server: one holder at a time.
// Each follower takes a Handle of it, its follow.Leadership.
type Lock struct {
	mu     sync.Mutex
	holder *Handle
}

// Handle is one would-be holder of a Lock.
type Handle struct{ l *Lock }

// Handle returns a new would-be holder.
func (l *Lock) Handle() *Handle { return &Handle{l: l} }

// Steal gives the lock to h, as if the holder's session died and h took
// it: the holder's next Check fails.
func (l *Lock) Steal(h *Handle) {
	l.mu.Lock()
	l.holder = h
	l.mu.Unlock()
}

// TryAcquire implements follow.Leadership.
func (h *Handle) TryAcquire(context.Context) (bool, error) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.holder == nil {
		h.l.holder = h
	}
	return h.l.holder == h, nil
}

// Check implements follow.Leadership.
func (h *Handle) Check(context.Context) error {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.holder != h {
		return follow.ErrLeadershipLost
	}
	return nil
}

// Release implements follow.Leadership.
func (h *Handle) Release(context.Context) {
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	if h.l.holder == h {
		h.l.holder = nil
	}
}

var _ follow.Leadership = (*Handle)(nil)
