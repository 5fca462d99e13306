package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

// racers is how many goroutines race to append at one version.
const racers = 16

// instances returns n store instances on store's data: reopened ones when the
// backend can (each with its own connections), else store itself n times.
func (s suite) instances(t *testing.T, store eventstore.Store, n int) []eventstore.Store {
	out := make([]eventstore.Store, n)
	for i := range out {
		out[i] = store
		if s.cfg.reopen != nil {
			out[i] = s.cfg.reopen(t, store)
		}
	}
	return out
}

type raceResult struct {
	racer int
	res   eventstore.AppendResult
	err   error
}

// race makes racers goroutines append one event each to stream at expected,
// released together, each through its own store instance.
func (s suite) race(ctx context.Context, t *testing.T, store eventstore.Store, stream string, expected eventstore.ExpectedVersion) ([]eventstore.EventData, []raceResult) {
	stores := s.instances(t, store, racers)
	batches := make([]eventstore.EventData, racers)
	for i := range batches {
		batches[i] = newEvents(1, i)[0]
	}
	start := make(chan struct{})
	results := make([]raceResult, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			res, err := stores[i].Append(ctx, stream, expected, batches[i:i+1])
			results[i] = raceResult{racer: i, res: res, err: err}
		})
	}
	close(start)
	wg.Wait()
	return batches, results
}

// requireOneWinner asserts exactly one racer won at version want and every
// other one was refused with the winner's version as the actual one.
func requireOneWinner(ctx context.Context, t *testing.T, store eventstore.Store, stream string, expected eventstore.ExpectedVersion, want int64, events []eventstore.EventData, results []raceResult) {
	t.Helper()
	winner := -1
	for _, r := range results {
		if r.err == nil {
			require.Equal(t, -1, winner, "two racers won: %d and %d", winner, r.racer)
			winner = r.racer
			require.Equal(t, want, r.res.NextExpectedVersion)
			continue
		}
		requireWrongVersion(t, r.err, stream, expected, want)
	}
	require.NotEqual(t, -1, winner, "no racer won")
	got := readStream(ctx, t, store, stream, 100)
	require.Equal(t, seq(0, want+1), versions(got))
	require.Equal(t, events[winner].ID, got[want].ID, "the winner's event sits at the raced version")
	requireChain(t, got)
}

func (s suite) raceExact(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("race-exact")
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), newEvents(3, 0))
	events, results := s.race(ctx, t, store, stream, eventstore.Exact(2))
	requireOneWinner(ctx, t, store, stream, eventstore.Exact(2), 3, events, results)
}

func (s suite) raceNoStream(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("race-nostream")
	events, results := s.race(ctx, t, store, stream, eventstore.NoStream())
	requireOneWinner(ctx, t, store, stream, eventstore.NoStream(), 0, events, results)
}

// raceAny: unconditional appends all succeed, each at a version of its own.
func (s suite) raceAny(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("race-any")
	events, results := s.race(ctx, t, store, stream, eventstore.Any())
	byVersion := make(map[int64]string)
	for _, r := range results {
		require.NoError(t, r.err, "racer %d", r.racer)
		_, taken := byVersion[r.res.NextExpectedVersion]
		require.False(t, taken, "two racers got version %d", r.res.NextExpectedVersion)
		byVersion[r.res.NextExpectedVersion] = events[r.racer].ID
	}
	got := readStream(ctx, t, store, stream, 100)
	require.Equal(t, seq(0, racers), versions(got))
	for _, e := range got {
		require.Equal(t, byVersion[e.Version], e.ID, "the event at version %d is the one whose append reported it", e.Version)
	}
	requireChain(t, got)
}

// readAllStreamOrder: under concurrent appends to shared streams, the global
// log holds every stream's events in version order. Writers move on to new
// streams every few appends, so streams are also created under contention
// (where a Postgres upsert can take its transaction id before it waits).
func (s suite) readAllStreamOrder(t *testing.T) {
	const (
		writers   = 4
		perWriter = 30
		perStream = 5 // appends per writer before the writers move on
	)
	ctx, store := testContext(t), s.newStore(t)
	streams := make([][2]string, perWriter/perStream)
	for i := range streams {
		streams[i] = [2]string{newStream("shared-a"), newStream("shared-b")}
	}
	stores := s.instances(t, store, writers)
	start := make(chan struct{})
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range perWriter {
				stream := streams[i/perStream][(w+i)%2]
				if _, err := stores[w].Append(ctx, stream, eventstore.Any(), newEvents(1+i%2, i)); err != nil {
					errs <- err
					return
				}
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
	for i := range perWriter {
		total += writers * (1 + i%2)
	}
	got := waitReadAll(ctx, t, store, nil, total)
	require.Len(t, got, total)
	requireIncreasing(t, got)
	last := make(map[string]int64)
	for _, e := range got {
		prev, seen := last[e.StreamID]
		if !seen {
			prev = eventstore.NoStreamVersion
		}
		require.Equal(t, prev+1, e.Version, "stream %s out of version order in the global log at %s", e.StreamID, e.Position)
		last[e.StreamID] = e.Version
	}
	require.Len(t, last, 2*len(streams))
	for _, pair := range streams {
		for _, stream := range pair {
			requireChain(t, readStream(ctx, t, store, stream, 100))
		}
	}
}

// readAllCommitOrder: an event that takes its global position before another
// but commits after it must not be skipped by a reader that checkpoints. So
// while it is uncommitted, ReadAll returns nothing past it; once committed,
// both come in global order.
func (s suite) readAllCommitOrder(t *testing.T) {
	if s.cfg.holdOpen == nil {
		t.Skip("backend has no way to hold an append open (WithHoldOpenAppend)")
	}
	ctx, store := testContext(t), s.newStore(t)

	before := newEvents(1, 0)
	mustAppend(ctx, t, store, newStream("before"), eventstore.NoStream(), before)
	seen := waitReadAll(ctx, t, store, nil, 1)
	require.Equal(t, ids(before), recordedIDs(seen))
	checkpoint := seen[0].Position

	slow, fast := newEvents(1, 1), newEvents(1, 2)
	commit, err := s.cfg.holdOpen(ctx, store, newStream("slow"), slow)
	require.NoError(t, err, "hold an append open")
	committed := false
	t.Cleanup(func() {
		if !committed {
			_ = commit()
		}
	})
	fastStream := newStream("fast")
	mustAppend(ctx, t, store, fastStream, eventstore.NoStream(), fast) // committed, after slow in global order
	fastRead, err := store.ReadStream(ctx, fastStream, 0, 10)
	require.NoError(t, err)
	require.Equal(t, ids(fast), recordedIDs(fastRead), "the later append is committed")

	all, err := store.ReadAll(ctx, nil, 100)
	require.NoError(t, err)
	require.Equal(t, ids(before), recordedIDs(all), "nothing past the open append is readable")
	after, err := store.ReadAll(ctx, checkpoint, 100)
	require.NoError(t, err)
	require.Empty(t, after, "nothing past the open append is readable from the checkpoint")

	committed = true
	require.NoError(t, commit(), "commit the held append")
	got := waitReadAll(ctx, t, store, checkpoint, 2)
	require.Equal(t, append(ids(slow), ids(fast)...), recordedIDs(got), "both events, in global order")
	requireIncreasing(t, append(seen, got...))
}
