package storetest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
)

func (s suite) readStreamBasics(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("read")

	got, err := store.ReadStream(ctx, newStream("missing"), 0, 10)
	require.NoError(t, err, "a missing stream reads as empty")
	require.Empty(t, got)

	events := newEvents(5, 0)
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), events)
	mustAppend(ctx, t, store, newStream("neighbour"), eventstore.NoStream(), newEvents(3, 0))

	got, err = store.ReadStream(ctx, stream, 2, 2)
	require.NoError(t, err)
	require.Equal(t, ids(events[2:4]), recordedIDs(got), "from 2, limit 2")
	require.Equal(t, []int64{2, 3}, versions(got))

	got, err = store.ReadStream(ctx, stream, 3, 100)
	require.NoError(t, err)
	require.Equal(t, ids(events[3:]), recordedIDs(got), "a limit past the end")

	got, err = store.ReadStream(ctx, stream, -5, 100)
	require.NoError(t, err)
	require.Equal(t, ids(events), recordedIDs(got), "a negative from reads from the start")

	for _, from := range []int64{5, 6, 1 << 40} {
		got, err = store.ReadStream(ctx, stream, from, 10)
		require.NoError(t, err)
		require.Empty(t, got, "from %d is past the end", from)
	}
	got, err = store.ReadStream(ctx, stream, 0, 0)
	require.NoError(t, err)
	require.Empty(t, got, "limit 0")
}

func (s suite) readStreamTenThousand(t *testing.T) {
	const total = 10_000
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("long")
	var want []string
	expected := eventstore.NoStream()
	for len(want) < total {
		batch := newEvents(eventstore.MaxAppendBatch, len(want))
		next := mustAppend(ctx, t, store, stream, expected, batch)
		want = append(want, ids(batch)...)
		require.Equal(t, int64(len(want)-1), next)
		expected = eventstore.Exact(next)
	}
	got := readStream(ctx, t, store, stream, 999) // pages that do not divide the stream
	require.Len(t, got, total)
	require.Equal(t, seq(0, total), versions(got))
	require.Equal(t, want, recordedIDs(got))
}

// readRoundTrip: what was appended is what ReadStream and ReadAll return.
func (s suite) readRoundTrip(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	stream := newStream("roundtrip")
	events := []eventstore.EventData{
		{ID: newEvents(1, 0)[0].ID, Type: "OperationRequested",
			Data:     []byte(`{"operation_id": "OP-4471", "amount": {"value": 1250, "currency": "EUR"}, "tags": ["a", "b"]}`),
			Metadata: []byte(`{"correlation_id": "COR-2210", "actor": "api"}`)},
		{ID: newEvents(1, 0)[0].ID, Type: "Bare"}, // no data, no metadata
	}
	mustAppend(ctx, t, store, stream, eventstore.NoStream(), events)

	byStream := readStream(ctx, t, store, stream, 10)
	require.Len(t, byStream, 2)
	byLog := waitReadAll(ctx, t, store, nil, 2)
	require.Len(t, byLog, 2)
	for i, got := range byStream {
		want := events[i]
		require.Equal(t, stream, got.StreamID)
		require.Equal(t, int64(i), got.Version)
		require.Equal(t, want.ID, got.ID)
		require.Equal(t, want.Type, got.Type)
		if want.Data == nil {
			require.Empty(t, got.Data, "no data in, no data out")
			require.Empty(t, got.Metadata, "no metadata in, no metadata out")
		} else {
			require.JSONEq(t, string(want.Data), string(got.Data))
			require.JSONEq(t, string(want.Metadata), string(got.Metadata))
		}
		require.False(t, got.RecordedAt.IsZero(), "recorded time")
		require.NotNil(t, got.Position)

		// The global log returns the same record.
		require.Equal(t, got.ID, byLog[i].ID)
		require.Equal(t, got.Data, byLog[i].Data)
		require.Equal(t, got.Metadata, byLog[i].Metadata)
		require.Equal(t, got.Version, byLog[i].Version)
		require.True(t, got.RecordedAt.Equal(byLog[i].RecordedAt))
		require.Zero(t, got.Position.Compare(byLog[i].Position), "same position from both reads")
	}
	require.True(t, byStream[0].RecordedAt.Equal(byStream[1].RecordedAt), "one append, one recorded time")
}

// readAllPaging: a reader that pages through the log, checkpointing each
// page's last position as text and parsing it back, reads every event once,
// in order.
func (s suite) readAllPaging(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)
	streams := []string{newStream("p0"), newStream("p1"), newStream("p2"), newStream("p3"), newStream("p4")}
	var want []string
	for i := range 30 { // sequential appends: the global order is the append order
		batch := newEvents(1+i%2, i)
		mustAppend(ctx, t, store, streams[i%len(streams)], eventstore.Any(), batch)
		want = append(want, ids(batch)...)
	}
	all := waitReadAll(ctx, t, store, nil, len(want))
	require.Equal(t, want, recordedIDs(all))
	requireIncreasing(t, all)

	var (
		got        []eventstore.RecordedEvent
		checkpoint string // as a reader would persist it; "" is the start
	)
	for range len(want) + 1 { // bounded: every page but the last holds an event
		var after eventstore.Position
		if checkpoint != "" {
			p, err := store.ParsePosition(checkpoint)
			require.NoError(t, err, "parse checkpoint %q", checkpoint)
			require.Equal(t, checkpoint, p.String(), "String(ParsePosition(s)) == s")
			after = p
		}
		page, err := store.ReadAll(ctx, after, 7)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		last := page[len(page)-1].Position
		checkpoint = last.String()
		p, err := store.ParsePosition(checkpoint)
		require.NoError(t, err)
		require.Zero(t, p.Compare(last), "ParsePosition(String()) compares equal")
		require.Zero(t, last.Compare(p))
	}
	require.Equal(t, want, recordedIDs(got), "paged read equals the whole log")
}

type foreignPosition struct{}

func (foreignPosition) String() string                  { return "foreign" }
func (foreignPosition) Compare(eventstore.Position) int { return 0 }

// readAllPositions: an empty log, bad checkpoints, and the start position.
func (s suite) readAllPositions(t *testing.T) {
	ctx, store := testContext(t), s.newStore(t)

	got, err := store.ReadAll(ctx, nil, 10)
	require.NoError(t, err)
	require.Empty(t, got, "an empty log")

	for _, text := range []string{"", "not-a-position", "-1", "1/2/3/4", " 1", "\x00"} {
		_, err := store.ParsePosition(text)
		require.ErrorIs(t, err, eventstore.ErrInvalidPosition, "ParsePosition(%q)", text)
	}
	_, err = store.ReadAll(ctx, foreignPosition{}, 10)
	require.ErrorIs(t, err, eventstore.ErrInvalidPosition, "another backend's position")
	require.False(t, errors.Is(err, eventstore.ErrUnavailable))

	mustAppend(ctx, t, store, newStream("pos"), eventstore.NoStream(), newEvents(3, 0))
	all := waitReadAll(ctx, t, store, nil, 3)
	got, err = store.ReadAll(ctx, nil, 0)
	require.NoError(t, err)
	require.Empty(t, got, "limit 0")
	got, err = store.ReadAll(ctx, all[0].Position, 1)
	require.NoError(t, err)
	require.Equal(t, recordedIDs(all[1:2]), recordedIDs(got), "strictly after, limit 1")
	got, err = store.ReadAll(ctx, all[2].Position, 10)
	require.NoError(t, err)
	require.Empty(t, got, "after the last event")
}
