package feed

import (
	"container/list"
	"sync"

	"opledger/domain"
	"opledger/eventstore"
)

// headCache keeps the heads of the operations met most recently, at most
// max of them (least recently used go first): a head never changes once
// written, and an operation's changes are close together in the log, so
// most entries find their head here or earlier in their own page, and a
// miss costs one read of the stream's first event. A head is trusted only
// while the events of its stream come after it in the log: one that comes
// before it means the log went back (a failover lost the stream, and it was
// written again), and the head is read again (Reader.headFor).
type headCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *headItem, most recently used first
	items map[domain.OperationID]*list.Element
}

type headItem struct {
	op   domain.OperationID
	head Head
	// at and eventID are where the head's event, OperationRequested, sits
	// in the log: no later event of its stream can sit before it.
	at      eventstore.Position
	eventID string
}

func newHeadCache(max int) *headCache {
	return &headCache{max: max, order: list.New(), items: make(map[domain.OperationID]*list.Element, max)}
}

func (c *headCache) get(op domain.OperationID) (headItem, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[op]
	if !ok {
		return headItem{}, false
	}
	c.order.MoveToFront(el)
	return *el.Value.(*headItem), true
}

func (c *headCache) put(it headItem) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[it.op]; ok {
		*el.Value.(*headItem) = it
		c.order.MoveToFront(el)
		return
	}
	c.items[it.op] = c.order.PushFront(&it)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*headItem).op)
	}
}

func (c *headCache) drop(op domain.OperationID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[op]; ok {
		c.order.Remove(el)
		delete(c.items, op)
	}
}
