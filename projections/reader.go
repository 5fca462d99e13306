package projections

import (
	"runtime"
	"sync"

	"opledger/eventstore"
)

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
