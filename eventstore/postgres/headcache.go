package postgres

import (
	"sync"

	"opledger/eventstore/chain"
)

// DefaultHeadCacheEntries bounds the head cache when Config.HeadCacheEntries
// is zero: about 64 bytes plus the stream name per entry, so some 10 MiB at
// most for operation streams.
const DefaultHeadCacheEntries = 65_536

// streamHead is what an append needs to link its events without reading
// the stream: the hash of the event at version (nil when that event was
// stored before hashing began: the next one links to chain.Genesis), and
// its id, to name it when the stream no longer holds it.
type streamHead struct {
	version int64
	hash    []byte
	id      string
}

// prev is the hash the event after this head links to.
func (h streamHead) prev() chain.Hash {
	p, ok, err := chain.FromBytes(h.hash)
	if !ok || err != nil {
		return chain.Genesis
	}
	return p
}

// headCache remembers, per stream, the hash of one event this store read or
// wrote, so that an append at exactly that version computes its links in Go
// and the statement only has to check them (see appendBatchSQL). What it
// holds is a fact that never changes while the store keeps what it
// acknowledged (events are immutable: the event at version v of a stream
// always has the hash it was stored with), so an entry is only useless
// once the stream moved on; the statement checks the streams row's head
// hash anyway, so even a tampered row cannot make an append link to the
// wrong predecessor (the append then takes the slow path, which reads the
// row). A store that lost acknowledged writes (a failover to a standby
// that had not received them) breaks the fact: the stream ends before the
// cached version, or holds another event there. The store notices that on
// a read or an append that meets it (regressed.go), drops the entry and
// tells its observer.
//
// It is bounded by two generations of at most limit/2 entries each: when the
// young one is full it becomes the old one and the old one is dropped, so a
// stream used since the last turnover survives it. Safe for concurrent use.
type headCache struct {
	mu         sync.Mutex
	limit      int // per generation
	young, old map[string]streamHead
}

func newHeadCache(entries int) *headCache {
	per := max(entries/2, 1)
	return &headCache{limit: per, young: make(map[string]streamHead), old: make(map[string]streamHead)}
}

// get returns the cached head of stream if it is at version.
func (c *headCache) get(stream string, version int64) (streamHead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.young[stream]
	if !ok {
		if h, ok = c.old[stream]; ok {
			c.putLocked(stream, h)
		}
	}
	if !ok || h.version != version {
		return streamHead{}, false
	}
	return h, true
}

// put records that the event at h.version of stream has hash h.hash, unless
// a later event of the stream is known already.
func (c *headCache) put(stream string, h streamHead) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.young[stream]; ok && cur.version > h.version {
		return
	}
	c.putLocked(stream, h)
}

func (c *headCache) putLocked(stream string, h streamHead) {
	if _, ok := c.young[stream]; !ok && len(c.young) >= c.limit {
		c.old, c.young = c.young, make(map[string]streamHead, c.limit)
	}
	c.young[stream] = h
	delete(c.old, stream)
}

// peek returns what is known of stream, without counting it as used.
func (c *headCache) peek(stream string) (streamHead, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.young[stream]; ok {
		return h, true
	}
	h, ok := c.old[stream]
	return h, ok
}

// forget drops what is known of stream.
func (c *headCache) forget(stream string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.young, stream)
	delete(c.old, stream)
}
