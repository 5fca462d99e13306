package follow

import (
	"context"
	"fmt"

	"opledger/eventstore"
)

// Reader reads the log in batches and prepares them, one batch ahead when
// asked: when a read comes back full, the next one (after its last event)
// is read and prepared in the background while the caller handles this
// one. At most one read is in flight, so the memory held is bounded by two
// batches. A Follower reads through one; a one-shot fold (a rebuild) may use
// one of its own. Not safe for concurrent use; Close it when done.
type Reader[T any] struct {
	store     eventstore.Store
	size      int
	prepare   func([]eventstore.RecordedEvent) T
	readAhead bool
	// ahead is the read in flight after position aheadAfter, if any.
	ahead      chan read[T]
	aheadAfter eventstore.Position
}

// read is one read: the batch, or the error.
type read[T any] struct {
	batch Batch[T]
	err   error
}

// NewReader returns a reader of store in batches of size events (1 ..
// MaxBatchSize), prepared by prepare (nil: Batch.Prepared stays zero),
// reading one batch ahead when readAhead is set.
func NewReader[T any](store eventstore.Store, size int, prepare func([]eventstore.RecordedEvent) T, readAhead bool) *Reader[T] {
	return &Reader[T]{store: store, size: min(max(size, 1), MaxBatchSize), prepare: prepare, readAhead: readAhead}
}

// Next returns the batch after after: the one read ahead if it started
// there, else a fresh read (a read ahead from elsewhere is waited for and
// dropped).
func (r *Reader[T]) Next(ctx context.Context, after eventstore.Position) (Batch[T], error) {
	var got read[T]
	if r.ahead != nil && samePosition(r.aheadAfter, after) {
		got = <-r.ahead
		r.ahead = nil
	} else {
		r.Close()
		got = r.read(ctx, after)
	}
	if got.err == nil && got.batch.Full && r.readAhead {
		last := got.batch.Events[len(got.batch.Events)-1].Position
		r.ahead, r.aheadAfter = make(chan read[T], 1), last
		go func(ch chan<- read[T]) { ch <- r.read(ctx, last) }(r.ahead)
	}
	return got.batch, got.err
}

func (r *Reader[T]) read(ctx context.Context, after eventstore.Position) read[T] {
	events, err := r.store.ReadAll(ctx, after, r.size)
	if err != nil {
		return read[T]{err: fmt.Errorf("read log after %q: %w", positionText(after), err)}
	}
	b := Batch[T]{After: after, Events: events, Full: len(events) == r.size}
	if r.prepare != nil && len(events) > 0 {
		b.Prepared = r.prepare(events)
	}
	return read[T]{batch: b}
}

// Close waits for a read in flight (its context bounds it) and drops it.
func (r *Reader[T]) Close() {
	if r.ahead != nil {
		<-r.ahead
		r.ahead = nil
	}
}

// samePosition says a and b are the same position (nil is the start).
func samePosition(a, b eventstore.Position) bool {
	switch {
	case a == nil && b == nil:
		return true
	case a == nil:
		return b.Compare(nil) == 0
	}
	return a.Compare(b) == 0
}

// positionText is p's text, "" for the start of the log.
func positionText(p eventstore.Position) string {
	if p == nil {
		return ""
	}
	return p.String()
}
