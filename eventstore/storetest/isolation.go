package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

// appendIsolation: many goroutines append at once through one store
// instance (where a backend groups concurrent appends, they share
// statements), each to a stream of its own, and between its appends each
// also sends an append at a wrong version and a resend of the append it
// just made. Every wrong append is refused with the stream's actual
// version and writes nothing, every resend succeeds at the same version
// without writing again, and no refusal costs another goroutine's append:
// every stream ends with exactly its own events, in order, chained, and
// the global log holds each stream's events in version order.
func (s suite) appendIsolation(t *testing.T) {
	const (
		writers   = 12
		perWriter = 6
	)
	ctx, store := testContext(t), s.newStore(t)
	streams := make([]string, writers)
	for w := range streams {
		streams[w] = newStream(fmt.Sprintf("isolation-%d", w))
	}
	written := make([][]eventstore.EventData, writers)
	start := make(chan struct{})
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			if err := isolatedWriter(ctx, store, streams[w], perWriter, w, &written[w]); err != nil {
				errs <- fmt.Errorf("writer %d: %w", w, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for w, stream := range streams {
		got := readStream(ctx, t, store, stream, 100)
		require.Equal(t, ids(written[w]), recordedIDs(got), "stream %s holds exactly its writer's events", stream)
		require.Equal(t, seq(0, int64(len(got))), versions(got))
		requireChain(t, got)
		total += len(got)
	}
	all := waitReadAll(ctx, t, store, nil, total)
	last := make(map[string]int64)
	for _, e := range all {
		prev, seen := last[e.StreamID]
		if !seen {
			prev = eventstore.NoStreamVersion
		}
		require.Equal(t, prev+1, e.Version, "stream %s out of version order in the global log", e.StreamID)
		last[e.StreamID] = e.Version
	}
}

// isolatedWriter makes n appends to stream (1 or 2 events each), each
// followed by an append at a stale version and a resend of itself.
func isolatedWriter(ctx context.Context, store eventstore.Store, stream string, n, w int, written *[]eventstore.EventData) error {
	expected := eventstore.NoStream()
	version := eventstore.NoStreamVersion
	for i := range n {
		events := newEvents(1+(i+w)%2, 100*w+10*i)
		res, err := store.Append(ctx, stream, expected, events)
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
		if want := version + int64(len(events)); res.NextExpectedVersion != want {
			return fmt.Errorf("append %d: next expected version %d, want %d", i, res.NextExpectedVersion, want)
		}
		*written = append(*written, events...)
		stale := eventstore.Exact(version + 7) // never the stream's version: it only grows by 1 or 2
		if version < 0 {
			stale = eventstore.Exact(3)
		}
		_, err = store.Append(ctx, stream, stale, newEvents(1, -1))
		var wrong *eventstore.WrongExpectedVersionError
		if !errors.As(err, &wrong) || wrong.Actual != res.NextExpectedVersion {
			return fmt.Errorf("append %d at stale version %s: want a wrong-version error with actual %d, got %v", i, stale, res.NextExpectedVersion, err)
		}
		again, err := store.Append(ctx, stream, expected, events)
		if err != nil || again.NextExpectedVersion != res.NextExpectedVersion {
			return fmt.Errorf("resend of append %d: %v, next %d, want %d", i, err, again.NextExpectedVersion, res.NextExpectedVersion)
		}
		version = res.NextExpectedVersion
		expected = eventstore.Exact(version)
	}
	return nil
}
