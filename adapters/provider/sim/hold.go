package sim

// holds tracks responses withheld by FaultHoldResponse. Guarded by
// Simulator.mu.
type holds struct {
	count   int
	signal  chan struct{} // closed while count > 0
	release chan struct{} // closed by Release; replaced afterwards
}

func newHolds() holds {
	return holds{signal: make(chan struct{}), release: make(chan struct{})}
}

// Held returns a channel that is closed once at least one response is being
// held: immediately closed if one is held now. A test waits on it instead of
// sleeping. Once every held response is gone, later calls return a new
// channel.
func (s *Simulator) Held() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds.signal
}

// HeldCount is the number of responses being held now.
func (s *Simulator) HeldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds.count
}

// Release lets every response held now go, and returns how many were held.
// Responses held later wait for the next Release.
func (s *Simulator) Release() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.holds.release)
	s.holds.release = make(chan struct{})
	return s.holds.count
}

// beginHold registers a held response and returns the channel that releases it.
func (s *Simulator) beginHold() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds.count++
	if s.holds.count == 1 {
		close(s.holds.signal)
	}
	return s.holds.release
}

func (s *Simulator) endHold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds.count--
	if s.holds.count == 0 {
		s.holds.signal = make(chan struct{})
	}
}
