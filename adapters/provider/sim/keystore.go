package sim

import "time"

// remembered is a record kept under an idempotency key: when its key was
// first seen (retention counts from there) and whether a request under it
// is executing (such a record is never forgotten).
type remembered interface {
	comparable
	seenAt() time.Time
	executing() bool
}

// keyStore remembers records under idempotency keys for a retention and
// forgets them in the order their keys were first seen: every record is
// queued once when it is put, and forget pops expired records off the
// queue's front, so a request pays for the records that expired since the
// last one (amortised O(1)), never for the ones still kept. Its memory is the
// map and the queue, both bounded by the callers' limit on remembered keys
// (Config.MaxRememberedKeys) plus the requests executing past the
// retention. Not safe for concurrent use: guarded by Simulator.mu.
type keyStore[R remembered] struct {
	retention time.Duration
	records   map[string]R
	// queue holds the keys in the order put, from head on; an entry whose
	// key now maps to another record (forgotten and put again) is skipped
	// when it reaches the front.
	queue []queuedKey[R]
	head  int
}

type queuedKey[R remembered] struct {
	key    string
	record R
}

func newKeyStore[R remembered](retention time.Duration) *keyStore[R] {
	return &keyStore[R]{retention: retention, records: make(map[string]R)}
}

// len is the number of keys remembered.
func (k *keyStore[R]) len() int { return len(k.records) }

// get returns the record under key, unless it expired by now (then it is
// forgotten, as forget would have).
func (k *keyStore[R]) get(key string, now time.Time) (R, bool) {
	r, ok := k.records[key]
	if ok && k.expired(r, now) {
		delete(k.records, key)
		var zero R
		return zero, false
	}
	return r, ok
}

// put remembers r under key; r.seenAt() is expected to be the clock's
// reading now, so the queue stays in time order.
func (k *keyStore[R]) put(key string, r R) {
	k.records[key] = r
	k.queue = append(k.queue, queuedKey[R]{key: key, record: r})
}

func (k *keyStore[R]) expired(r R, now time.Time) bool {
	return !r.executing() && now.Sub(r.seenAt()) >= k.retention
}

// forget drops every record whose retention ended by now, oldest first,
// and returns how many queue entries it examined (the work done, for
// tests). A record still executing past its retention is queued again at
// the back, so it is examined again only after the records put since; the
// records behind it are not held up.
func (k *keyStore[R]) forget(now time.Time) (examined int) {
	// Bounded: each pass pops one entry; an executing one is queued again
	// at most once per call (requeued counts them).
	requeued := 0
	for k.head < len(k.queue) && requeued < len(k.queue)-k.head {
		e := k.queue[k.head]
		if now.Sub(e.record.seenAt()) < k.retention {
			break // the front is the oldest still kept: nothing behind it expired
		}
		examined++
		k.queue[k.head] = queuedKey[R]{}
		k.head++
		if current, ok := k.records[e.key]; !ok || current != e.record {
			continue // forgotten already, or put again since
		}
		if e.record.executing() {
			k.queue = append(k.queue, e)
			requeued++
			continue
		}
		delete(k.records, e.key)
	}
	k.compact()
	return examined
}

// compact moves the queue's live part to the front once the popped part is
// the larger half, so the backing array stays within twice the live
// entries and the copying is amortised O(1) per pop.
func (k *keyStore[R]) compact() {
	if k.head < 1024 || k.head < len(k.queue)/2 {
		return
	}
	n := copy(k.queue, k.queue[k.head:])
	clear(k.queue[n:])
	k.queue = k.queue[:n]
	k.head = 0
}
