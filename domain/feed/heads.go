package feed

import (
	"container/list"
	"sync"

	"opledger/domain"
)

// headCache keeps the heads of the operations met most recently, at most
// max of them (least recently used go first): a head never changes once
// written, and an operation's changes are close together in the log, so
// most entries find their head here or earlier in their own page, and a
// miss costs one read of the stream's first event.
type headCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *headItem, most recently used first
	items map[domain.OperationID]*list.Element
}

type headItem struct {
	op   domain.OperationID
	head Head
}

func newHeadCache(max int) *headCache {
	return &headCache{max: max, order: list.New(), items: make(map[domain.OperationID]*list.Element, max)}
}

func (c *headCache) get(op domain.OperationID) (Head, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[op]
	if !ok {
		return Head{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*headItem).head, true
}

func (c *headCache) put(op domain.OperationID, h Head) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[op]; ok {
		el.Value.(*headItem).head = h
		c.order.MoveToFront(el)
		return
	}
	c.items[op] = c.order.PushFront(&headItem{op: op, head: h})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*headItem).op)
	}
}

func (c *headCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
