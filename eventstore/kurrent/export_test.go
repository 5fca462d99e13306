package kurrent

// InFlight counts the calls in flight on the store's clients, for tests
// that must act while calls are running.
func InFlight(s *Store) int {
	s.conn.mu.Lock()
	defer s.conn.mu.Unlock()
	n := 0
	for cl := range s.conn.open {
		n += cl.inflight
	}
	return n
}
