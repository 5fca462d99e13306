package sim

import (
	"fmt"
	"sync"
	"time"
)

// simClock is the simulated time: start + (base() − origin) + advanced. It
// has its own lock, taken last, so it can be read under the simulator's lock.
type simClock struct {
	base   func() time.Time
	origin time.Time
	start  time.Time

	mu       sync.Mutex
	advanced time.Duration
}

func newSimClock(base func() time.Time, start time.Time) *simClock {
	origin := base()
	if start.IsZero() {
		start = origin
	}
	return &simClock{base: base, origin: origin, start: start}
}

func (c *simClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(c.base().Sub(c.origin) + c.advanced).UTC()
}

func (c *simClock) advance(d time.Duration) (time.Time, error) {
	if d < 0 {
		return time.Time{}, fmt.Errorf("advance %s: the simulated clock only moves forward", d)
	}
	c.mu.Lock()
	c.advanced += d
	c.mu.Unlock()
	return c.now(), nil
}
