package ledger

import (
	"container/list"
	"sync"

	"opledger/domain"
)

// Defaults of the state cache (Config.StateCacheEntries, StateCacheBytes).
const (
	// DefaultStateCacheEntries bounds the operations whose state one
	// handler remembers: the ones in flight, with room to spare.
	DefaultStateCacheEntries = 10_000
	// DefaultStateCacheBytes bounds their estimated size (see stateSize).
	DefaultStateCacheBytes = 64 << 20
)

// stateCache remembers, per operation stream, the state it folded into at
// a version and the id of the event at that version (its anchor), so that
// a command decides without reading the stream again, and a catch-up read
// can tell a stream that went back (see Handler.catchUp).
// It is never trusted beyond that: a command decided on a cached state
// appends with that state's version as the expected version, so a stream
// that moved meanwhile (another handler, another process) refuses the
// append, and the handler reloads and decides again. A decision that
// appends nothing is not fenced that way, so the handler checks the stream
// for newer events before returning it (see Handler.Execute).
//
// Bounded by entries and by estimated bytes, least recently used first
// out. Safe for concurrent use.
//
// It shares states, never copies them: a state put is frozen, changed by
// no one after (the handler changes only a state it folded or forked
// itself and has not handed out; see folding.shared), so get hands the
// very state to any number of commands at once, which only read it
// (Decision's contract). A command that appends folds its events into a
// fork of it (domain's Operation.Fork: what the events change is copied,
// the rest shared) and puts that; a catch-up forks before folding the
// first newer event. So no command ever sees another's partial state.
type stateCache struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	byStream   map[string]*list.Element
	lru        *list.List // front: most recently used
}

type cachedState struct {
	stream string
	state  *domain.Operation
	anchor string // the id of the event at state.Version
	size   int64
}

// newStateCache returns nil (no caching) when maxEntries is negative.
func newStateCache(maxEntries int, maxBytes int64) *stateCache {
	if maxEntries < 0 {
		return nil
	}
	return &stateCache{maxEntries: maxEntries, maxBytes: maxBytes, byStream: make(map[string]*list.Element), lru: list.New()}
}

// get returns stream's cached state, frozen (never to be changed), and its
// anchor.
func (c *stateCache) get(stream string) (*domain.Operation, string, bool) {
	if c == nil {
		return nil, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byStream[stream]
	if !ok {
		return nil, "", false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cachedState)
	return e.state, e.anchor, true
}

// kind returns the kind of stream's cached state, without copying it.
func (c *stateCache) kind(stream string) (domain.OperationKind, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byStream[stream]
	if !ok {
		return "", false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cachedState).state.Kind, true
}

// put remembers state as stream's, with the id of the event at its
// version (anchor), unless a state of a later version is cached already (a
// slower command finishing after a faster one). It takes state as it is,
// with no copy: the caller must never change state again, whether or not
// it was kept.
func (c *stateCache) put(stream string, state *domain.Operation, anchor string) {
	if c == nil {
		return
	}
	size := stateSize(state)
	if size > c.maxBytes {
		c.forget(stream)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byStream[stream]; ok {
		e := el.Value.(*cachedState)
		if e.state.Version > state.Version {
			return
		}
		c.bytes += size - e.size
		e.state, e.anchor, e.size = state, anchor, size
		c.lru.MoveToFront(el)
	} else {
		c.byStream[stream] = c.lru.PushFront(&cachedState{stream: stream, state: state, anchor: anchor, size: size})
		c.bytes += size
	}
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes { // each turn removes one: bounded by the entries
		oldest := c.lru.Back()
		e := oldest.Value.(*cachedState)
		c.lru.Remove(oldest)
		delete(c.byStream, e.stream)
		c.bytes -= e.size
	}
}

// forget drops stream's state.
func (c *stateCache) forget(stream string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byStream[stream]; ok {
		c.bytes -= el.Value.(*cachedState).size
		c.lru.Remove(el)
		delete(c.byStream, stream)
	}
}

// stateSize estimates what a state costs in memory: its strings and the
// fixed size of each record it holds, plus the map and list overhead.
func stateSize(o *domain.Operation) int64 {
	n := int64(400 + len(o.ID) + len(o.ExportID) + len(o.OrderID) + len(o.Currency) + len(o.CorrelationID) + len(o.RequestKey) + len(o.RequestHash))
	for _, d := range o.Decisions {
		n += 160 + int64(len(d.ID)+len(d.IdempotencyKey)+len(d.KeyPolicy)+len(d.Verdict))
	}
	for id, c := range o.Capabilities {
		n += 260 + int64(2*len(id)+len(c.DecisionID)+len(c.ConsumedBy)+len(c.Execution))
	}
	for _, x := range o.Executions {
		n += 320 + int64(len(x.ID)+len(x.CapabilityID)+len(x.MessageID)+len(x.LeaseOwner)+len(x.IdempotencyKey)+len(x.ProviderReference))
		for _, l := range x.HeldLeases {
			n += 40 + int64(len(l.SecretDigest))
		}
	}
	for m := range o.Messages {
		n += 64 + int64(len(m))
	}
	return n
}
