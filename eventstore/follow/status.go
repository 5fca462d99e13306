package follow

import "time"

// Status is what a follower is doing, for /readyz, /metrics and tests.
type Status struct {
	// Leading is true while the follower holds its leadership (always, for
	// a follower without one, while it runs); a standby waits to take over
	// and is healthy.
	Leading bool
	// Failing is true while the follower's latest attempt hit an outage:
	// Stage says where, Err what, Since when the current streak of outages
	// began (by Config.Now), Failures how many in a row. A batch handled or
	// the log found caught up ends the streak; so does a standby's refused
	// lock.
	Failing  bool
	Stage    string
	Err      string
	Since    time.Time
	Failures int
}

// Status returns a snapshot of the follower's status. Safe for concurrent
// use.
func (f *Follower[T]) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *Follower[T]) setLeading(leading bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status.Leading = leading
}

// noteFailure records an outage at stage.
func (f *Follower[T]) noteFailure(stage string, err error, failures int) {
	now := f.cfg.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.status
	if !s.Failing {
		s.Since = now
	}
	s.Failing, s.Stage, s.Err, s.Failures = true, stage, err.Error(), failures
}

// noteHealthy ends a streak of outages.
func (f *Follower[T]) noteHealthy() {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.status
	s.Failing, s.Stage, s.Err, s.Since, s.Failures = false, "", "", time.Time{}, 0
}
