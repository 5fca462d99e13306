package console

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"sync"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// Bounds of the remembered timelines.
const (
	// maxTimelines bounds the operations whose collapsed timelines are
	// remembered (least recently viewed dropped first): each holds its
	// state-changing events' rows and a few hundred bytes per run of
	// evidence, so a flood of refusals adds nothing to it.
	maxTimelines = 256
	// timelinePage is how many events one read of a stream takes.
	timelinePage = 1000
)

// timelines remembers, per operation, its collapsed timeline
// (audit.Timeline) and the versions of its stream and its evidence stream
// it was read to, so that a view or a live update of an operation's page
// reads only what they gained since: one read of each, from the last event
// it knows on, not the whole history again. Each read checks that the last event it
// knows is still there, the same: a stream that went backwards (a restore,
// a failover that lost writes) or changed is never trusted from memory; it
// is read again from the start, and said so in the log. Safe for concurrent
// use.
type timelines struct {
	store eventstore.Store
	log   *slog.Logger
	mu    sync.Mutex
	lru   *list.List // of *cachedTimeline, most recently viewed first
	byOp  map[domain.OperationID]*list.Element
}

type cachedTimeline struct {
	op     domain.OperationID
	mu     sync.Mutex // held while the stream is read and the timeline used
	t      audit.Timeline
	lastID string // the event id at version t.Next-1
	// lastEvidenceID is the event id at version t.EvidenceNext-1 of the
	// operation's evidence stream.
	lastEvidenceID string
}

func newTimelines(store eventstore.Store, log *slog.Logger) *timelines {
	return &timelines{store: store, log: log, lru: list.New(), byOp: map[domain.OperationID]*list.Element{}}
}

// with brings op's timeline up to date with its stream and calls f with it,
// holding its lock (f must not keep it). An operation with no events is
// audit.ErrNoSuchOperation.
func (ts *timelines) with(ctx context.Context, op domain.OperationID, f func(*audit.Timeline) error) error {
	c := ts.entry(op)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.update(ctx, ts.store, ts.log); err != nil {
		ts.forget(op, c)
		return err
	}
	if c.t.Next == 0 {
		ts.forget(op, c)
		return fmt.Errorf("timeline %s: %w", op.StreamName(), audit.ErrNoSuchOperation)
	}
	return f(&c.t)
}

func (ts *timelines) entry(op domain.OperationID) *cachedTimeline {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if el, ok := ts.byOp[op]; ok {
		ts.lru.MoveToFront(el)
		return el.Value.(*cachedTimeline)
	}
	c := &cachedTimeline{op: op}
	ts.byOp[op] = ts.lru.PushFront(c)
	for ts.lru.Len() > maxTimelines { // bounded: one over at most
		last := ts.lru.Back()
		ts.lru.Remove(last)
		delete(ts.byOp, last.Value.(*cachedTimeline).op)
	}
	return c
}

// forget drops c, unless another has taken op's place meanwhile.
func (ts *timelines) forget(op domain.OperationID, c *cachedTimeline) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if el, ok := ts.byOp[op]; ok && el.Value.(*cachedTimeline) == c {
		ts.lru.Remove(el)
		delete(ts.byOp, op)
	}
}

// update reads what op's stream and its evidence stream gained since c
// last read them (c.t.Next, c.t.EvidenceNext), each from the last event c
// knows of it on, and adds the new rows in the order of the log.
func (c *cachedTimeline) update(ctx context.Context, store eventstore.Store, log *slog.Logger) error {
	restarted := false
	// Bounded: each round adds at least a page of one stream, up to the
	// replay bound, or starts over once.
	for c.t.Events <= audit.MaxReplayEvents {
		ops, opFull, okOp, err := readAfter(ctx, store, c.op.StreamName(), c.t.Next, c.lastID)
		if err != nil {
			return err
		}
		evs, evFull, okEv, err := readAfter(ctx, store, domain.EvidenceStreamOf(c.op), c.t.EvidenceNext, c.lastEvidenceID)
		if err != nil {
			return err
		}
		if !okOp || !okEv {
			if restarted {
				return fmt.Errorf("read %s: the stream changed while it was read again", c.op.StreamName())
			}
			log.WarnContext(ctx, "console: an operation's streams no longer hold the events its page showed (they went backwards or changed): reading them again from the start",
				"stream", c.op.StreamName(), "known_through", c.t.Next-1, "evidence_known_through", c.t.EvidenceNext-1)
			c.t, c.lastID, c.lastEvidenceID, restarted = audit.Timeline{}, "", "", true
			continue
		}
		// A full page may have more after it: rows past the earliest full
		// page's last position wait for the next round, which reads on
		// from where this one ended.
		var cut eventstore.Position
		if opFull {
			cut = ops[len(ops)-1].Position
		}
		if evFull && (cut == nil || evs[len(evs)-1].Position.Compare(cut) < 0) {
			cut = evs[len(evs)-1].Position
		}
		i, j := 0, 0
		for i < len(ops) || j < len(evs) {
			var rec eventstore.RecordedEvent
			if j == len(evs) || (i < len(ops) && ops[i].Position.Compare(evs[j].Position) < 0) {
				rec = ops[i]
				i++
			} else {
				rec = evs[j]
				j++
			}
			if cut != nil && rec.Position.Compare(cut) > 0 {
				break
			}
			row, err := audit.RowOf(rec)
			if err != nil {
				return err
			}
			if err := c.t.Add(row); err != nil {
				return fmt.Errorf("read %s: %w", rec.StreamID, err)
			}
			if row.Stream != "" {
				c.lastEvidenceID = rec.ID
			} else {
				c.lastID = rec.ID
			}
		}
		if !opFull && !evFull {
			return nil
		}
	}
	return fmt.Errorf("read %s: history longer than %d events: refusing to render it", c.op.StreamName(), audit.MaxReplayEvents)
}

// readAfter reads a page of stream after version next-1, whose id must be
// lastID (ok false when the stream no longer holds it there: it went
// backwards or changed). full says the page may have more after it.
func readAfter(ctx context.Context, store eventstore.Store, stream string, next int64, lastID string) (page []eventstore.RecordedEvent, full, ok bool, err error) {
	from := max(next-1, 0)
	page, err = store.ReadStream(ctx, stream, from, timelinePage)
	if err != nil {
		return nil, false, false, fmt.Errorf("read %s: %w", stream, err)
	}
	full = len(page) == timelinePage
	if next > 0 {
		if len(page) == 0 || page[0].Version != from || page[0].ID != lastID {
			return nil, false, false, nil
		}
		page = page[1:]
	}
	return page, full, true, nil
}
