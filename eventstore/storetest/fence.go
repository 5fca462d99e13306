package storetest

import (
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

// appendFenced: an append beside a fence is written only while the fenced
// stream holds the fence's event at its version; refused (ErrFenceGone,
// ErrWrongExpectedVersion) it writes nothing; appends to the fenced stream
// never break it; a retry of a fenced append already written succeeds.
func (s suite) appendFenced(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	fenced, beside := newStream("fenced"), newStream("beside")
	ops := newEvents(2, 0)
	mustAppend(ctx, t, store, fenced, eventstore.NoStream(), ops)
	at1 := eventstore.Fence{Stream: fenced, Version: 1, EventID: ops[1].ID}

	first := newEvents(1, 0)
	require.Equal(t, int64(0), mustAppend(ctx, t, store, beside, eventstore.NoStream().Beside(at1), first), "the fence holds")
	// The fenced stream moves on: the fence still holds.
	mustAppend(ctx, t, store, fenced, eventstore.Exact(1), newEvents(1, 2))
	require.Equal(t, int64(1), mustAppend(ctx, t, store, beside, eventstore.Exact(0).Beside(at1), newEvents(1, 1)), "after the fenced stream moved on")
	require.Equal(t, int64(2), mustAppend(ctx, t, store, beside, eventstore.Any().Beside(at1), newEvents(1, 2)), "Any beside a fence")

	gone := []eventstore.Fence{
		{Stream: fenced, Version: 1, EventID: ops[0].ID},               // another event at the version
		{Stream: fenced, Version: 5, EventID: ops[1].ID},               // past the stream's end
		{Stream: fenced, Version: 0, EventID: uuid.NewString()},        // an event never stored
		{Stream: newStream("nothing"), Version: 0, EventID: ops[0].ID}, // a stream that does not exist
		{Stream: fenced, Version: 0, EventID: "not-an-id"},             // not an id any backend holds
	}
	for _, f := range gone {
		_, err := store.Append(ctx, beside, eventstore.Exact(2).Beside(f), newEvents(1, 3))
		require.ErrorIs(t, err, eventstore.ErrFenceGone, "fence %s", f)
		require.ErrorIs(t, err, eventstore.ErrWrongExpectedVersion, "fence %s", f)
		var fe *eventstore.FenceError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, f, fe.Fence)
		require.Equal(t, beside, fe.Stream)
	}
	require.Len(t, readStream(ctx, t, store, beside, 10), 3, "a refused fenced append writes nothing")

	// A wrong expected version beside a fence that holds is a wrong
	// expected version.
	_, err := store.Append(ctx, beside, eventstore.Exact(7).Beside(at1), newEvents(1, 3))
	require.ErrorIs(t, err, eventstore.ErrWrongExpectedVersion)
	require.NotErrorIs(t, err, eventstore.ErrFenceGone)

	// A retry of a fenced append already written succeeds again.
	require.Equal(t, int64(0), mustAppend(ctx, t, store, beside, eventstore.NoStream().Beside(at1), first), "retry")
}

// appendFencedRacing: fenced appends to many streams at once through one
// store — on a backend that shares statements between concurrent appends,
// several in one statement — each written only if its own fence holds.
func (s suite) appendFencedRacing(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	fenced := newStream("fenced")
	ops := newEvents(1, 0)
	mustAppend(ctx, t, store, fenced, eventstore.NoStream(), ops)
	holds := eventstore.Fence{Stream: fenced, Version: 0, EventID: ops[0].ID}
	gone := eventstore.Fence{Stream: fenced, Version: 0, EventID: uuid.NewString()}

	const n = 32
	streams := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		streams[i] = newStream("beside")
		f := holds
		if i%2 == 1 {
			f = gone
		}
		wg.Go(func() {
			_, errs[i] = store.Append(ctx, streams[i], eventstore.NoStream().Beside(f), newEvents(1, i))
		})
	}
	wg.Wait()
	for i := range n {
		events := readStream(ctx, t, store, streams[i], 10)
		if i%2 == 1 {
			require.ErrorIs(t, errs[i], eventstore.ErrFenceGone, "append %d: its fence is gone", i)
			require.Empty(t, events, "append %d wrote nothing", i)
			continue
		}
		require.NoError(t, errs[i], "append %d: its fence holds", i)
		require.Len(t, events, 1)
	}
}
