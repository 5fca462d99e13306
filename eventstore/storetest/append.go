package storetest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

func (s suite) appendAny(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("any")

	require.Equal(t, int64(0), mustAppend(ctx, t, store, stream, eventstore.Any(), newEvents(1, 0)), "Any on a new stream")
	require.Equal(t, int64(2), mustAppend(ctx, t, store, stream, eventstore.Any(), newEvents(2, 1)), "Any on an existing stream")
	require.Equal(t, seq(0, 3), versions(readStream(ctx, t, store, stream, 10)))
}

func (s suite) appendNoStream(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("nostream")

	require.Equal(t, int64(1), mustAppend(ctx, t, store, stream, eventstore.NoStream(), newEvents(2, 0)), "NoStream on a new stream")
	_, err := store.Append(ctx, stream, eventstore.NoStream(), newEvents(1, 2))
	requireWrongVersion(t, err, stream, eventstore.NoStream(), 1)
	require.Len(t, readStream(ctx, t, store, stream, 10), 2)
}

func (s suite) appendExact(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("exact")
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), newEvents(3, 0)) // versions 0..2

	for _, wrong := range []int64{0, 1, 3, 4, 1000} { // behind and ahead
		_, err := store.Append(ctx, stream, eventstore.Exact(wrong), newEvents(1, 3))
		requireWrongVersion(t, err, stream, eventstore.Exact(wrong), 2)
	}
	require.Equal(t, int64(3), mustAppend(ctx, t, store, stream, eventstore.Exact(2), newEvents(1, 3)))
	require.Equal(t, int64(5), mustAppend(ctx, t, store, stream, eventstore.Exact(3), newEvents(2, 4)))
	require.Equal(t, seq(0, 6), versions(readStream(ctx, t, store, stream, 10)))

	// Exact on a stream that does not exist reports NoStreamVersion.
	missing := newStream("missing")
	for _, v := range []int64{0, 1, 7} {
		_, err := store.Append(ctx, missing, eventstore.Exact(v), newEvents(1, 0))
		requireWrongVersion(t, err, missing, eventstore.Exact(v), eventstore.NoStreamVersion)
	}
	require.Empty(t, readStream(ctx, t, store, missing, 10))
}

// appendExactNoStreamVersion: Exact(-1) is NoStream.
func (s suite) appendExactNoStreamVersion(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("exact-minus-one")

	require.True(t, eventstore.Exact(eventstore.NoStreamVersion).IsNoStream())
	require.Equal(t, int64(0), mustAppend(ctx, t, store, stream, eventstore.Exact(-1), newEvents(1, 0)), "Exact(-1) on a new stream")
	_, err := store.Append(ctx, stream, eventstore.Exact(-1), newEvents(1, 1))
	requireWrongVersion(t, err, stream, eventstore.NoStream(), 0)
}

// appendOffByOne probes the boundary between an empty stream and a
// one-event stream from both sides.
func (s suite) appendOffByOne(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("one")

	_, err := store.Append(ctx, stream, eventstore.Exact(0), newEvents(1, 0))
	requireWrongVersion(t, err, stream, eventstore.Exact(0), eventstore.NoStreamVersion) // empty is not version 0
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), newEvents(1, 0))            // now one event, version 0

	_, err = store.Append(ctx, stream, eventstore.NoStream(), newEvents(1, 1))
	requireWrongVersion(t, err, stream, eventstore.NoStream(), 0) // one event is not "no stream"
	_, err = store.Append(ctx, stream, eventstore.Exact(1), newEvents(1, 1))
	requireWrongVersion(t, err, stream, eventstore.Exact(1), 0) // n events is version n-1
	_, err = store.Append(ctx, stream, eventstore.Exact(-1), newEvents(1, 1))
	requireWrongVersion(t, err, stream, eventstore.NoStream(), 0)

	require.Equal(t, int64(1), mustAppend(ctx, t, store, stream, eventstore.Exact(0), newEvents(1, 1)), "Exact(0) on a one-event stream")
	require.Equal(t, seq(0, 2), versions(readStream(ctx, t, store, stream, 10)))
}

// appendRefusedWritesNothing: a refused append leaves no event behind, not
// even its ids: the same events append cleanly afterwards.
func (s suite) appendRefusedWritesNothing(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("refused")
	first := newEvents(1, 0)
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), first)

	refused := newEvents(3, 1)
	_, err := store.Append(ctx, stream, eventstore.Exact(5), refused)
	requireWrongVersion(t, err, stream, eventstore.Exact(5), 0)
	got := readStream(ctx, t, store, stream, 10)
	require.Equal(t, ids(first), recordedIDs(got))

	require.Equal(t, int64(3), mustAppend(ctx, t, store, stream, eventstore.Exact(0), refused))
	require.Equal(t, append(ids(first), ids(refused)...), recordedIDs(readStream(ctx, t, store, stream, 10)))
}

// appendBatch: one append's events get consecutive versions and increasing
// positions, in the order given.
func (s suite) appendBatch(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("batch")
	batch := newEvents(5, 0)
	require.Equal(t, int64(4), mustAppend(ctx, t, store, stream, eventstore.NoStream(), batch))
	more := newEvents(eventstore.MaxAppendBatch, 5)
	require.Equal(t, int64(4+eventstore.MaxAppendBatch), mustAppend(ctx, t, store, stream, eventstore.Exact(4), more))

	got := readStream(ctx, t, store, stream, 2000)
	require.Equal(t, append(ids(batch), ids(more)...), recordedIDs(got))
	require.Equal(t, seq(0, int64(len(got))), versions(got))
	requireIncreasing(t, got)
}

func (s suite) appendInvalid(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("invalid")
	dup := newEvents(2, 0)
	dup[1].ID = dup[0].ID
	noID, noType := newEvents(1, 0), newEvents(1, 0)
	noID[0].ID, noType[0].Type = "", ""

	cases := []struct {
		name   string
		stream string
		events []eventstore.EventData
	}{
		{"empty stream name", "", newEvents(1, 0)},
		{"nil events", stream, nil},
		{"no events", stream, []eventstore.EventData{}},
		{"too many events", stream, newEvents(eventstore.MaxAppendBatch+1, 0)},
		{"event without id", stream, noID},
		{"event without type", stream, noType},
		{"id repeated in one append", stream, dup},
	}
	for _, tc := range cases {
		for _, expected := range []eventstore.ExpectedVersion{eventstore.Any(), eventstore.NoStream(), eventstore.Exact(0)} {
			_, err := store.Append(ctx, tc.stream, expected, tc.events)
			require.ErrorIs(t, err, eventstore.ErrInvalidAppend, "%s at %s", tc.name, expected)
			require.NotErrorIs(t, err, eventstore.ErrUnavailable, tc.name)
			require.NotErrorIs(t, err, eventstore.ErrWrongExpectedVersion, tc.name)
		}
	}
	require.Empty(t, readStream(ctx, t, store, stream, 10))
	require.Empty(t, readStream(ctx, t, store, "", 10))
}

// appendIdempotentRetry: re-appending the same ids at the versions they were
// written at (a retry after a lost acknowledgement) succeeds with the same
// result and writes nothing, for every kind of expected version, even after
// the stream moved on.
func (s suite) appendIdempotentRetry(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("retry")

	first := newEvents(1, 0)
	require.Equal(t, int64(0), mustAppend(ctx, t, store, stream, eventstore.NoStream(), first))
	require.Equal(t, int64(0), mustAppend(ctx, t, store, stream, eventstore.NoStream(), first), "NoStream retry")

	exact := newEvents(2, 1)
	require.Equal(t, int64(2), mustAppend(ctx, t, store, stream, eventstore.Exact(0), exact))
	require.Equal(t, int64(2), mustAppend(ctx, t, store, stream, eventstore.Exact(0), exact), "Exact retry")

	anyBatch := newEvents(3, 3)
	require.Equal(t, int64(5), mustAppend(ctx, t, store, stream, eventstore.Any(), anyBatch))
	require.Equal(t, int64(5), mustAppend(ctx, t, store, stream, eventstore.Any(), anyBatch), "Any retry")

	// The stream moves on; the retries still report what they wrote.
	mustAppend(ctx, t, store, stream, eventstore.Exact(5), newEvents(1, 6))
	require.Equal(t, int64(0), mustAppend(ctx, t, store, stream, eventstore.NoStream(), first), "late NoStream retry")
	require.Equal(t, int64(2), mustAppend(ctx, t, store, stream, eventstore.Exact(0), exact), "late Exact retry")
	require.Equal(t, int64(5), mustAppend(ctx, t, store, stream, eventstore.Any(), anyBatch), "late Any retry")

	got := readStream(ctx, t, store, stream, 100)
	require.Equal(t, seq(0, 7), versions(got), "retries wrote nothing")
	require.Equal(t, append(append(ids(first), ids(exact)...), ids(anyBatch)...), recordedIDs(got)[:6])
}

// appendRetryRefused: the same ids at versions other than where they sit,
// partly new ids, or ids stored in another stream are refused.
func (s suite) appendRetryRefused(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("retry-refused")
	first, second := newEvents(1, 0), newEvents(2, 1)
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), first) // version 0
	mustAppend(ctx, t, store, stream, eventstore.Exact(0), second)  // versions 1, 2

	_, err := store.Append(ctx, stream, eventstore.Exact(2), second) // would put them at 3, 4
	requireWrongVersion(t, err, stream, eventstore.Exact(2), 2)
	_, err = store.Append(ctx, stream, eventstore.Exact(1), second) // would put them at 2, 3
	requireWrongVersion(t, err, stream, eventstore.Exact(1), 2)
	_, err = store.Append(ctx, stream, eventstore.NoStream(), second) // would put them at 0, 1
	requireWrongVersion(t, err, stream, eventstore.NoStream(), 2)
	_, err = store.Append(ctx, stream, eventstore.Exact(0), first) // sits at 0, would go to 1
	requireWrongVersion(t, err, stream, eventstore.Exact(0), 2)
	// A prefix of an append, at the versions it holds, is a retry of it too.
	require.Equal(t, int64(1), mustAppend(ctx, t, store, stream, eventstore.Exact(0), second[:1]))
	_, err = store.Append(ctx, stream, eventstore.Exact(0), []eventstore.EventData{second[1], second[0]}) // reordered
	requireWrongVersion(t, err, stream, eventstore.Exact(0), 2)

	partly := append([]eventstore.EventData{second[1]}, newEvents(1, 9)...) // one stored id, one new
	_, err = store.Append(ctx, stream, eventstore.Exact(2), partly)
	requireWrongVersion(t, err, stream, eventstore.Exact(2), 2)
	_, err = store.Append(ctx, stream, eventstore.Any(), partly)
	requireWrongVersion(t, err, stream, eventstore.Any(), 2)

	other := newStream("other")
	_, err = store.Append(ctx, other, eventstore.NoStream(), first) // ids are unique store-wide
	requireWrongVersion(t, err, other, eventstore.NoStream(), eventstore.NoStreamVersion)
	_, err = store.Append(ctx, other, eventstore.Any(), second)
	requireWrongVersion(t, err, other, eventstore.Any(), eventstore.NoStreamVersion)

	require.Empty(t, readStream(ctx, t, store, other, 10))
	got := readStream(ctx, t, store, stream, 10)
	require.Equal(t, append(ids(first), ids(second)...), recordedIDs(got))
	require.NotContains(t, strings.Join(recordedIDs(got), ","), partly[1].ID)
}
