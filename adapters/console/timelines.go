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
// (audit.Timeline) and the stream version it was read to, so that a view
// or a live update of an operation's page reads only what its stream
// gained since: one read of the last event it knows and those after it,
// not the whole stream again. Each read checks that the last event it
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

// update reads what op's stream gained since c.t.Next, from the last event
// c knows on.
func (c *cachedTimeline) update(ctx context.Context, store eventstore.Store, log *slog.Logger) error {
	stream := c.op.StreamName()
	restarted := false
	// Bounded: each round reads a full page further, up to the replay bound,
	// or starts over once.
	for c.t.Next <= audit.MaxReplayEvents {
		from := max(c.t.Next-1, 0)
		page, err := store.ReadStream(ctx, stream, from, timelinePage)
		if err != nil {
			return fmt.Errorf("read %s: %w", stream, err)
		}
		got := len(page)
		if c.t.Next > 0 {
			if got == 0 || page[0].Version != from || page[0].ID != c.lastID {
				if restarted {
					return fmt.Errorf("read %s: the stream changed while it was read again", stream)
				}
				log.WarnContext(ctx, "console: an operation's stream no longer holds the events its page showed (it went backwards or changed): reading it again from the start",
					"stream", stream, "known_through", c.t.Next-1)
				c.t, c.lastID, restarted = audit.Timeline{}, "", true
				continue
			}
			page = page[1:]
		}
		for _, rec := range page {
			row, err := audit.RowOf(rec)
			if err != nil {
				return err
			}
			if err := c.t.Add(row); err != nil {
				return fmt.Errorf("read %s: %w", stream, err)
			}
			c.lastID = rec.ID
		}
		if got < timelinePage {
			return nil
		}
	}
	return fmt.Errorf("read %s: stream longer than %d events: refusing to render it", stream, audit.MaxReplayEvents)
}
