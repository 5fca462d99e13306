package projections

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"opledger/eventstore"
)

// logReader reads the log in batches and decodes them (on every processor,
// see decodeParallel), one batch ahead:
// when a read comes back full, the next one (after its last event) is read
// and decoded in the background while the caller applies this one. At most
// one read is in flight. Not safe for concurrent use; close it when done.
type logReader struct {
	store eventstore.Store
	size  int
	// ahead is the read in flight after position aheadAfter, if any.
	ahead      chan logBatch
	aheadAfter string
}

// logBatch is one read: the events and their decoded forms, or the error.
type logBatch struct {
	events  []eventstore.RecordedEvent
	decoded []decodedEvent
	err     error
}

func newLogReader(store eventstore.Store, size int) *logReader {
	return &logReader{store: store, size: size}
}

// next returns the batch after cp: the one read ahead if it started there,
// else a fresh read (a read ahead from elsewhere is waited for and dropped).
func (r *logReader) next(ctx context.Context, cp Checkpoint) logBatch {
	var b logBatch
	if r.ahead != nil && r.aheadAfter == cp.Text {
		b = <-r.ahead
		r.ahead = nil
	} else {
		r.close()
		b = r.read(ctx, cp.Position, cp.Text)
	}
	if b.err == nil && len(b.events) == r.size {
		last := b.events[len(b.events)-1].Position
		r.ahead, r.aheadAfter = make(chan logBatch, 1), last.String()
		go func(ch chan<- logBatch) { ch <- r.read(ctx, last, last.String()) }(r.ahead)
	}
	return b
}

func (r *logReader) read(ctx context.Context, after eventstore.Position, text string) logBatch {
	events, err := r.store.ReadAll(ctx, after, r.size)
	if err != nil {
		return logBatch{err: fmt.Errorf("read log after %q: %w", text, err)}
	}
	return logBatch{events: events, decoded: decodeParallel(events)}
}

// minDecodeChunk is the fewest events worth a goroutine of their own
// (decoding one takes a few microseconds).
const minDecodeChunk = 256

// decodeParallel is decodeEvents over chunks of events on as many
// goroutines as there are processors (at most one per minDecodeChunk
// events): decoding is most of a catch-up's CPU, and the batch is
// independent event by event.
func decodeParallel(events []eventstore.RecordedEvent) []decodedEvent {
	workers := min(runtime.GOMAXPROCS(0), len(events)/minDecodeChunk)
	if workers <= 1 {
		return decodeEvents(events)
	}
	out := make([]decodedEvent, len(events))
	chunk := (len(events) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(events); lo += chunk {
		hi := min(lo+chunk, len(events))
		wg.Go(func() { copy(out[lo:hi], decodeEvents(events[lo:hi])) })
	}
	wg.Wait()
	return out
}

// close waits for a read in flight (its context bounds it) and drops it.
func (r *logReader) close() {
	if r.ahead != nil {
		<-r.ahead
		r.ahead = nil
	}
}
