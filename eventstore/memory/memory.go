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
	"opledger/eventstore/chain"
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
	heads   map[string]eventstore.StreamHead
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
	return &Store{streams: map[string][]int{}, ids: map[string]int{}, heads: map[string]eventstore.StreamHead{}, now: now}
}

// SetUnavailable makes every following call fail with ErrUnavailable (true)
// or work again (false).
func (s *Store) SetUnavailable(down bool) {
	s.mu.Lock()
	s.failing = down
	s.mu.Unlock()
}

// Append implements eventstore.Store. Data and metadata must be JSON that
// chain.Canonicalize accepts, as on every backend; each event is stored
// with its link in the stream's hash chain.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	contents := make([]chain.Hash, len(events))
	for i, e := range events {
		c, err := chain.Content(stream, e.ID, e.Type, e.Data, e.Metadata)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("append %s: %w: event %d (%s): %w", stream, eventstore.ErrInvalidAppend, i, e.ID, err)
		}
		contents[i] = c
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
	if f, ok := expected.Fence(); ok && !s.holds(f) {
		return eventstore.AppendResult{}, &eventstore.FenceError{Stream: stream, Fence: f}
	}
	if !expected.Matches(current) {
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
	}
	for _, e := range events {
		if _, dup := s.ids[e.ID]; dup {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: current}
		}
	}
	prev := chain.Genesis
	if h, ok, _ := chain.FromBytes(s.heads[stream].Hash); ok {
		prev = h
	}
	links := chain.Links(prev, current+1, contents)
	at := s.now().UTC()
	for k, e := range events {
		current++
		i := len(s.log)
		s.log = append(s.log, eventstore.RecordedEvent{
			StreamID: stream, Version: current, ID: e.ID, Type: e.Type,
			Data: slices.Clone(e.Data), Metadata: slices.Clone(e.Metadata),
			RecordedAt: at, Position: Position(i + 1),
			PrevHash: slices.Clone(prev[:]), Hash: slices.Clone(links[k][:]),
		})
		prev = links[k]
		s.streams[stream] = append(s.streams[stream], i)
		s.ids[e.ID] = i
	}
	s.heads[stream] = eventstore.StreamHead{StreamID: stream, Version: current, Hash: slices.Clone(prev[:])}
	return eventstore.AppendResult{NextExpectedVersion: current}, nil
}

// holds reports whether the store holds fence f's event. The caller holds
// s.mu.
func (s *Store) holds(f eventstore.Fence) bool {
	idx := s.streams[f.Stream]
	return f.Version >= 0 && f.Version < int64(len(idx)) && s.log[idx[f.Version]].ID == f.EventID
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

// ReadHeads implements eventstore.HeadReader: every stream's version and
// last hash as recorded at append (kept apart from the log, as PostgreSQL
// keeps its streams table).
func (s *Store) ReadHeads(ctx context.Context, after string, limit int) ([]eventstore.StreamHead, error) {
	if err := ctx.Err(); err != nil {
		return nil, eventstore.Unavailable("read heads", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.failing {
		return nil, eventstore.Unavailable("read heads", fmt.Errorf("memory store switched off"))
	}
	names := make([]string, 0, len(s.heads))
	for name := range s.heads {
		if name > after {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := make([]eventstore.StreamHead, 0, min(limit, len(names)))
	for _, name := range names[:min(max(limit, 0), len(names))] {
		out = append(out, s.heads[name])
	}
	return out, nil
}

// Tamper rewrites the stored log as an insider with write access to the
// storage could: rewrite receives a copy of the log in global order and
// returns the log to keep (fields changed, events removed, inserted or
// moved; hashes left alone or recomputed, as the forger likes). Positions
// are renumbered in the new order; the stream heads ReadHeads reports are
// left as they were unless keepHeads is false, when they are recomputed
// from the new log. For tamper-evidence tests only.
func (s *Store) Tamper(keepHeads bool, rewrite func(log []eventstore.RecordedEvent) []eventstore.RecordedEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := rewrite(slices.Clone(s.log))
	s.log = make([]eventstore.RecordedEvent, len(log))
	s.streams, s.ids = map[string][]int{}, map[string]int{}
	for i, e := range log {
		e.Position = Position(i + 1)
		s.log[i] = e
		s.streams[e.StreamID] = append(s.streams[e.StreamID], i)
		s.ids[e.ID] = i
		if !keepHeads {
			s.heads[e.StreamID] = eventstore.StreamHead{StreamID: e.StreamID, Version: e.Version, Hash: e.Hash}
		}
	}
}

// LoseLast drops the last n events of the log (all of them if it holds
// fewer), as a failover to a standby that had not received the last
// commits does: the streams they belonged to end earlier, or no longer
// exist, and their heads follow. Positions are handed out again from the
// new end, as a new primary reuses the lost transactions' ids: a reader
// that remembers a lost position must not trust it. For tests and the
// simulator.
func (s *Store) LoseLast(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := max(len(s.log)-max(n, 0), 0)
	s.log = s.log[:keep:keep]
	s.streams, s.ids, s.heads = map[string][]int{}, map[string]int{}, map[string]eventstore.StreamHead{}
	for i, e := range s.log {
		s.streams[e.StreamID] = append(s.streams[e.StreamID], i)
		s.ids[e.ID] = i
		s.heads[e.StreamID] = eventstore.StreamHead{StreamID: e.StreamID, Version: e.Version, Hash: e.Hash}
	}
}

// Len is the number of events the log holds.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.log)
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

var (
	_ eventstore.Store      = (*Store)(nil)
	_ eventstore.HeadReader = (*Store)(nil)
)
