// Package memory is an in-process eventstore.Store for unit tests and
// simulation. It keeps everything in memory and loses it on exit.
package memory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"opledger/eventstore"
)

// Position is the memory backend's global position: a 1-based sequence.
type Position uint64

func (p Position) String() string { return strconv.FormatUint(uint64(p), 10) }

// Compare implements eventstore.Position.
func (p Position) Compare(other eventstore.Position) int {
	var o Position
	if other != nil {
		o = other.(Position)
	}
	switch {
	case p < o:
		return -1
	case p > o:
		return 1
	}
	return 0
}

// Store is the in-memory backend. The zero value is not usable; call New.
type Store struct {
	mu      sync.RWMutex
	log     []eventstore.RecordedEvent // global order; index i holds position i+1
	streams map[string][]int           // stream -> indexes into log
	ids     map[string]int             // event id -> index into log
	now     func() time.Time
	// failing, when set, makes every call fail with ErrUnavailable (to
	// simulate an unreachable store).
	failing bool
}

// New returns an empty store. now stamps RecordedAt; nil means time.Now.
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{streams: map[string][]int{}, ids: map[string]int{}, now: now}
}

// SetUnavailable makes every following call fail with ErrUnavailable (true)
// or work again (false).
func (s *Store) SetUnavailable(down bool) {
	s.mu.Lock()
	s.failing = down
	s.mu.Unlock()
}

// Append implements eventstore.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return eventstore.AppendResult{}, eventstore.Unavailable("append "+stream, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return eventstore.AppendResult{}, eventstore.Unavailable("append "+stream, fmt.Errorf("memory store switched off"))
	}
	idx := s.streams[stream]
	current := int64(len(idx)) - 1
	if v, ok := s.idempotentRetry(stream, expected, events); ok {
		return eventstore.AppendResult{NextExpectedVersion: v}, nil
	}
	if !expected.Matches(current) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	}
	for _, e := range events {
		if _, dup := s.ids[e.ID]; dup {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
		}
	}
	at := s.now().UTC()
	for _, e := range events {
		current++
		i := len(s.log)
		s.log = append(s.log, eventstore.RecordedEvent{
			StreamID: stream, Version: current, ID: e.ID, Type: e.Type,
			Data: slices.Clone(e.Data), Metadata: slices.Clone(e.Metadata),
			RecordedAt: at, Position: Position(i + 1),
		})
		s.streams[stream] = append(s.streams[stream], i)
		s.ids[e.ID] = i
	}
	return eventstore.AppendResult{NextExpectedVersion: current}, nil
}

// idempotentRetry reports whether events were already appended to stream, in
// order, at the versions expected would have given them.
func (s *Store) idempotentRetry(stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (int64, bool) {
	first, ok := s.ids[events[0].ID]
	if !ok || s.log[first].StreamID != stream {
		return 0, false
	}
	start := s.log[first].Version
	if v, exact := expected.Version(); exact && v+1 != start {
		return 0, false
	}
	if expected.IsNoStream() && start != 0 {
		return 0, false
	}
	for k, e := range events {
		i, ok := s.ids[e.ID]
		if !ok || s.log[i].StreamID != stream || s.log[i].Version != start+int64(k) {
			return 0, false
		}
	}
	return start + int64(len(events)) - 1, true
}

// ReadStream implements eventstore.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, eventstore.Unavailable("read "+stream, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.failing {
		return nil, eventstore.Unavailable("read "+stream, fmt.Errorf("memory store switched off"))
	}
	idx := s.streams[stream]
	if from < 0 {
		from = 0
	}
	var out []eventstore.RecordedEvent
	for v := from; v < int64(len(idx)) && len(out) < limit; v++ {
		out = append(out, s.log[idx[v]])
	}
	return out, nil
}

// ReadAll implements eventstore.Store. Appends are atomic under the lock, so
// the log never has a gap a reader could skip.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, eventstore.Unavailable("read all", err)
	}
	var start Position
	if after != nil {
		p, ok := after.(Position)
		if !ok {
			return nil, fmt.Errorf("read all: %w: %T is not a memory position", eventstore.ErrInvalidPosition, after)
		}
		start = p
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.failing {
		return nil, eventstore.Unavailable("read all", fmt.Errorf("memory store switched off"))
	}
	if int(start) >= len(s.log) {
		return nil, nil
	}
	end := min(len(s.log), int(start)+limit)
	return slices.Clone(s.log[start:end]), nil
}

// ParsePosition implements eventstore.Store.
func (s *Store) ParsePosition(text string) (eventstore.Position, error) {
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", eventstore.ErrInvalidPosition, text, err)
	}
	return Position(n), nil
}

// Close implements eventstore.Store.
func (s *Store) Close() {}

var _ eventstore.Store = (*Store)(nil)
