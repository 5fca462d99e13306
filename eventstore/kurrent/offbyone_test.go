package kurrent_test

import (
	"errors"
	"io"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
)

// TestOffByOneAtBothEnds probes the version mapping where an off-by-one
// would show: between an empty stream and one of one event, and at the end
// of a long stream; and checks with the client itself that the server's
// revisions are the port's versions, not shifted by one.
func TestOffByOneAtBothEnds(t *testing.T) {
	onTargets(t, func(t *testing.T, tg target) {
		url, ns := tg.direct(t), newNamespace(t)
		s := openStore(t, kurrent.Config{URL: url, Namespace: ns, StreamPrefixes: everyStream})
		stream := "one-" + uuid.NewString()[:8]

		// The low end: no stream, then revision 0.
		_, err := s.Append(t.Context(), stream, eventstore.Exact(0), newEvents(1))
		requireWrongVersion(t, err, eventstore.Exact(0), eventstore.NoStreamVersion) // empty is not revision 0
		require.Equal(t, int64(0), mustAppend(t, s, stream, eventstore.NoStream(), newEvents(1)), "the first event is revision 0")
		_, err = s.Append(t.Context(), stream, eventstore.NoStream(), newEvents(1))
		requireWrongVersion(t, err, eventstore.NoStream(), 0) // one event is not "no stream"
		_, err = s.Append(t.Context(), stream, eventstore.Exact(1), newEvents(1))
		requireWrongVersion(t, err, eventstore.Exact(1), 0) // n events: revision n-1
		require.Equal(t, int64(1), mustAppend(t, s, stream, eventstore.Exact(0), newEvents(1)))

		// The high end: after a batch, the last revision.
		batch := newEvents(100)
		last := mustAppend(t, s, stream, eventstore.Exact(1), batch)
		require.Equal(t, int64(1+len(batch)), last)
		_, err = s.Append(t.Context(), stream, eventstore.Exact(last+1), newEvents(1))
		requireWrongVersion(t, err, eventstore.Exact(last+1), last) // one ahead
		_, err = s.Append(t.Context(), stream, eventstore.Exact(last-1), newEvents(1))
		requireWrongVersion(t, err, eventstore.Exact(last-1), last) // one behind
		require.Equal(t, last, mustAppend(t, s, stream, eventstore.Exact(1), batch), "a retry of the batch reports its last revision")
		tail := newEvents(1)
		require.Equal(t, last+1, mustAppend(t, s, stream, eventstore.Exact(last), tail))

		got, err := s.ReadStream(t.Context(), stream, last+1, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{last + 1}, versions(got), "reading from the last version returns the last event")
		require.Equal(t, ids(tail), recordedIDs(got))
		got, err = s.ReadStream(t.Context(), stream, last+2, 10)
		require.NoError(t, err)
		require.Empty(t, got, "reading past the last version returns nothing")

		// What the server itself says: revision == version, for the first
		// and the last event.
		raw := rawClient(t, url)
		first := readRaw(t, raw, ns+stream, esdb.Forwards, esdb.Start{})
		require.Equal(t, uint64(0), first.EventNumber)
		end := readRaw(t, raw, ns+stream, esdb.Backwards, esdb.End{})
		require.Equal(t, uint64(last+1), end.EventNumber)
		require.Equal(t, tail[0].ID, end.EventID.String())
	})
}

// readRaw reads one event of stream with the client library.
func readRaw(t *testing.T, c *esdb.Client, stream string, dir esdb.Direction, from esdb.StreamPosition) *esdb.RecordedEvent {
	t.Helper()
	rs, err := c.ReadStream(t.Context(), stream, esdb.ReadStreamOptions{Direction: dir, From: from}, 1)
	require.NoError(t, err)
	defer rs.Close()
	ev, err := rs.Recv()
	require.NoError(t, err)
	_, err = rs.Recv()
	require.True(t, errors.Is(err, io.EOF), "one event, then the end: %v", err)
	return ev.OriginalEvent()
}
