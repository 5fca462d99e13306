package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// requireChain asserts that a whole stream, read in version order, is one
// intact hash chain: version 0 links to chain.Genesis, every event to its
// predecessor's hash, and every stored hash is the one recomputed from the
// event as the backend returned it.
func requireChain(t *testing.T, events []eventstore.RecordedEvent) {
	t.Helper()
	prev := chain.Genesis
	for i, e := range events {
		require.Equal(t, int64(i), e.Version, "stream %s read from version 0", e.StreamID)
		require.Len(t, e.PrevHash, chain.Size, "%s@%d carries its predecessor's hash", e.StreamID, e.Version)
		require.Len(t, e.Hash, chain.Size, "%s@%d carries its hash", e.StreamID, e.Version)
		require.Equal(t, prev[:], e.PrevHash, "%s@%d links to its predecessor", e.StreamID, e.Version)
		r, err := chain.Recompute(e.StreamID, e.ID, e.Type, e.Version, e.Data, e.Metadata, e.PrevHash, e.Hash)
		require.NoError(t, err, "%s@%d", e.StreamID, e.Version)
		require.True(t, r.Matches(), "%s@%d: stored hash %x, recomputed from what the store returned %s", e.StreamID, e.Version, e.Hash, r.Hash)
		prev = r.Hash
	}
}

// requireSameLinks asserts both reads returned the same chain links.
func requireSameLinks(t *testing.T, want, got []eventstore.RecordedEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID)
		require.Equal(t, want[i].PrevHash, got[i].PrevHash, "prev hash of %s", want[i].ID)
		require.Equal(t, want[i].Hash, got[i].Hash, "hash of %s", want[i].ID)
	}
}

// chainLinks: every way of appending links events into their stream's
// chain, and ReadAll returns the same links as ReadStream.
func (s suite) chainLinks(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	a, b := newStream("chain-a"), newStream("chain-b")
	mustAppend(ctx, t, store, a, eventstore.NoStream(), newEvents(3, 0))
	mustAppend(ctx, t, store, a, eventstore.Exact(2), newEvents(2, 3))
	mustAppend(ctx, t, store, a, eventstore.Any(), newEvents(1, 5))
	mustAppend(ctx, t, store, b, eventstore.Any(), newEvents(2, 0))
	mustAppend(ctx, t, store, b, eventstore.Exact(1), newEvents(1, 2))

	gotA, gotB := readStream(ctx, t, store, a, 100), readStream(ctx, t, store, b, 100)
	require.Len(t, gotA, 6)
	require.Len(t, gotB, 3)
	requireChain(t, gotA)
	requireChain(t, gotB)
	require.NotEqual(t, gotA[0].Hash, gotB[0].Hash, "the stream is covered")

	byStream := map[string][]eventstore.RecordedEvent{}
	for _, e := range waitReadAll(ctx, t, store, nil, 9) {
		byStream[e.StreamID] = append(byStream[e.StreamID], e)
	}
	requireSameLinks(t, gotA, byStream[a])
	requireSameLinks(t, gotB, byStream[b])

	if heads, ok := store.(eventstore.HeadReader); ok {
		got, err := heads.ReadHeads(ctx, "", 100)
		require.NoError(t, err)
		want := map[string]eventstore.RecordedEvent{a: gotA[5], b: gotB[2]}
		require.Len(t, got, 2)
		for _, h := range got {
			require.Equal(t, want[h.StreamID].Version, h.Version, "head version of %s", h.StreamID)
			require.Equal(t, want[h.StreamID].Hash, h.Hash, "head hash of %s", h.StreamID)
		}
		page, err := heads.ReadHeads(ctx, got[0].StreamID, 100)
		require.NoError(t, err)
		require.Len(t, page, 1, "paging on the stream id")
	}
}

// chainRetry: an idempotent retry writes nothing, so the stream keeps the
// hashes its first attempt stored, and the chain goes on from them.
func (s suite) chainRetry(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("chain-retry")
	first, exact, anyBatch := newEvents(2, 0), newEvents(2, 2), newEvents(1, 4)
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), first)
	mustAppend(ctx, t, store, stream, eventstore.Exact(1), exact)
	mustAppend(ctx, t, store, stream, eventstore.Any(), anyBatch)
	before := readStream(ctx, t, store, stream, 100)

	require.Equal(t, int64(1), mustAppend(ctx, t, store, stream, eventstore.NoStream(), first))
	require.Equal(t, int64(3), mustAppend(ctx, t, store, stream, eventstore.Exact(1), exact))
	require.Equal(t, int64(4), mustAppend(ctx, t, store, stream, eventstore.Any(), anyBatch))
	mustAppend(ctx, t, store, stream, eventstore.Exact(4), newEvents(1, 5))

	after := readStream(ctx, t, store, stream, 100)
	require.Len(t, after, 6)
	requireSameLinks(t, before, after[:5])
	requireChain(t, after)
}

// chainCanonical: the hash stored at append is the one recomputed from what
// the backend returns, however the JSON was written (PostgreSQL's jsonb
// reorders keys, drops whitespace and respells numbers); JSON that cannot
// be hashed that way is refused and nothing is written.
func (s suite) chainCanonical(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("chain-canonical")
	events := newEvents(3, 0)
	events[0].Data = []byte("{ \"z\" : 1.50, \"a\" : [ 1E2, -0, 0.1, \"\\u00e9\\u2028\\ud83d\\ude00\\\"\" ],\n\t\"m\": {\"y\": null, \"x\": false} }")
	events[0].Metadata = []byte(`{"schema_version": 1, "actor": "w\u00f6rker"}`)
	events[1].Data, events[1].Metadata = nil, nil
	events[2].Data = []byte(`"a bare string"`)
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), events)
	requireChain(t, readStream(ctx, t, store, stream, 10))

	for name, data := range map[string]string{
		"duplicate member":     `{"n":1,"n":2}`,
		"inexact number":       `{"n":9007199254740993}`,
		"number out of range":  `{"n":1e400}`,
		"lone surrogate":       `{"n":"\ud83d"}`,
		"not JSON":             `{n:1}`,
		"trailing garbage":     `{"n":1} x`,
		"invalid UTF-8 string": "{\"n\":\"\xff\"}",
	} {
		bad := newEvents(1, 9)
		bad[0].Data = []byte(data)
		_, err := store.Append(ctx, stream, eventstore.Exact(2), bad)
		require.ErrorIs(t, err, eventstore.ErrInvalidAppend, name)
		require.ErrorIs(t, err, chain.ErrNotCanonicalizable, name)
		bad[0].Data, bad[0].Metadata = nil, []byte(data)
		_, err = store.Append(ctx, stream, eventstore.Exact(2), bad)
		require.ErrorIs(t, err, eventstore.ErrInvalidAppend, "%s in metadata", name)
	}
	require.Len(t, readStream(ctx, t, store, stream, 10), 3, "refused appends wrote nothing")
}
