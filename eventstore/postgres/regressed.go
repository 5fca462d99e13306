package postgres

import (
	"bytes"
	"context"
	"fmt"

	"opledger/eventstore"
)

// cacheName is the head cache's name in what the observer is told
// (domain.CacheHead).
const cacheName = "head_cache"

// ObserveRegressions has the head cache tell o of every regression it
// notices: a stream that ends before a version this store read or wrote,
// or holds another event there (see headCache). Without an observer the
// cache drops the entry and tells no one. Safe to call at any time.
func (s *Store) ObserveRegressions(o eventstore.RegressionObserver) {
	s.observer.Store(&o)
}

// regressed drops what the head cache knows of r.Stream and tells the
// observer.
func (s *Store) regressed(ctx context.Context, r eventstore.Regression) {
	s.heads.forget(r.Stream)
	r.Cache = cacheName
	if o := s.observer.Load(); o != nil && *o != nil {
		(*o).ObserveRegression(ctx, r)
	}
}

// checkRead compares a stream read of limit events from version from with
// what the head cache knew of the stream before the read (known): when the
// read reaches the known version, the event there must be the known one;
// when it reaches the stream's end (fewer than limit events) before the
// known version, the stream went back.
func (s *Store) checkRead(ctx context.Context, stream string, known streamHead, from int64, limit int, events []eventstore.RecordedEvent) {
	if known.version < from {
		return // the read starts after what the cache knows
	}
	for i := range events {
		e := &events[i]
		if e.Version != known.version {
			continue
		}
		if differs(known, e) {
			s.regressed(ctx, eventstore.Regression{Stream: stream, SeenVersion: known.version, SeenEventID: known.id,
				HeldVersion: events[len(events)-1].Version, HeldEventID: e.ID,
				Detail: fmt.Sprintf("%s holds event %s at version %d, not the one this store had read or written", stream, e.ID, known.version)})
		}
		return
	}
	if len(events) >= limit {
		return // the page ends before the known version: nothing to say
	}
	held := eventstore.NoStreamVersion // before from, or no events: the caller's reload says where
	if n := len(events); n > 0 {
		held = events[n-1].Version
	}
	s.regressed(ctx, eventstore.Regression{Stream: stream, SeenVersion: known.version, SeenEventID: known.id, HeldVersion: held,
		Detail: fmt.Sprintf("%s ends before version %d, which this store had read or written", stream, known.version)})
}

// rewritten reports whether stream no longer holds the event head names at
// head's version (another event is there, or none), telling the observer
// if so. A read that fails says nothing (the append goes on as if the row
// alone had changed, and its statement checks the row).
func (s *Store) rewritten(ctx context.Context, stream string, head streamHead) bool {
	events, err := s.ReadStream(ctx, stream, head.version, 1)
	if err != nil {
		return false
	}
	if len(events) == 1 && events[0].Version == head.version && !differs(head, &events[0]) {
		return false
	}
	r := eventstore.Regression{Stream: stream, SeenVersion: head.version, SeenEventID: head.id, HeldVersion: eventstore.NoStreamVersion,
		Detail: fmt.Sprintf("%s no longer holds the event at version %d this store had read or written", stream, head.version)}
	if len(events) == 1 {
		r.HeldEventID, r.HeldVersion = events[0].ID, head.version
		r.Detail = fmt.Sprintf("%s holds event %s at version %d, not the one this store had read or written", stream, events[0].ID, head.version)
	}
	s.regressed(ctx, r)
	return true
}

// differs reports whether e is not the event known names: another id, or
// another hash (when both carry one).
func differs(known streamHead, e *eventstore.RecordedEvent) bool {
	if known.id != "" && e.ID != known.id {
		return true
	}
	return known.hash != nil && e.Hash != nil && !bytes.Equal(known.hash, e.Hash)
}
