package kurrent

import (
	"errors"
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent/kurrenttest"
)

// TestExpectedRevisionMapping: the port's versions and KurrentDB's
// revisions both count from 0, so a number passes through unchanged, at
// both ends of the range.
func TestExpectedRevisionMapping(t *testing.T) {
	cases := []struct {
		in   eventstore.ExpectedVersion
		want esdb.ExpectedRevision
	}{
		{eventstore.Any(), esdb.Any{}},
		{eventstore.NoStream(), esdb.NoStream{}},
		{eventstore.Exact(-1), esdb.NoStream{}},              // an empty stream
		{eventstore.Exact(0), esdb.StreamRevision{Value: 0}}, // one event: its revision is 0, not 1
		{eventstore.Exact(1), esdb.StreamRevision{Value: 1}},
		{eventstore.Exact(1 << 62), esdb.StreamRevision{Value: 1 << 62}},
	}
	for _, tc := range cases {
		got, err := toExpectedRevision(tc.in)
		require.NoError(t, err, tc.in.String())
		require.Equal(t, tc.want, got, tc.in.String())
	}
	for _, v := range []int64{-2, -5, -1 << 62} {
		_, err := toExpectedRevision(eventstore.Exact(v))
		require.ErrorIs(t, err, eventstore.ErrInvalidAppend, "Exact(%d)", v)
	}
}

func TestNextVersion(t *testing.T) {
	next, ok := nextVersion(eventstore.NoStream(), 1)
	require.True(t, ok)
	require.Equal(t, int64(0), next, "one event on no stream lands at 0")
	next, ok = nextVersion(eventstore.NoStream(), 3)
	require.True(t, ok)
	require.Equal(t, int64(2), next)
	next, ok = nextVersion(eventstore.Exact(0), 1)
	require.True(t, ok)
	require.Equal(t, int64(1), next)
	next, ok = nextVersion(eventstore.Exact(41), 2)
	require.True(t, ok)
	require.Equal(t, int64(43), next)
	_, ok = nextVersion(eventstore.Any(), 2)
	require.False(t, ok)
}

// TestActualVersionFromClientMessage: the forms EventStore-Client-Go v4.2.0
// writes (TestWrongVersionMessageOfThePinnedClient produces them for real).
func TestActualVersionFromClientMessage(t *testing.T) {
	for msg, want := range map[string]int64{
		"wrong expected version: expecting '0' but got 'no_stream'":             eventstore.NoStreamVersion,
		"wrong expected version: expecting 'no_stream' but got '0'":             0,
		"wrong expected version: expecting '7' but got '12'":                    12,
		"wrong expected version: expecting 'any' but got '9223372036854775807'": 9223372036854775807,
	} {
		got, ok := actualVersion(msg)
		require.True(t, ok, msg)
		require.Equal(t, want, got, msg)
	}
	for _, msg := range []string{"", "wrong expected version", "expecting '1' but got ''", "expecting '1' but got '-3'", "expecting '1' but got 'x'", "expecting '1' but got '2"} {
		_, ok := actualVersion(msg)
		require.False(t, ok, msg)
	}
}

// TestWrongVersionMessageOfThePinnedClient: the message actualVersion
// parses is the one the pinned client writes, for both forms of the
// stream's version.
func TestWrongVersionMessageOfThePinnedClient(t *testing.T) {
	srv := kurrenttest.Start(t)
	cfg, err := esdb.ParseConnectionString(srv.DirectURL())
	require.NoError(t, err)
	cfg.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(cfg)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	event := func() esdb.EventData {
		return esdb.EventData{EventID: uuid.New(), EventType: "T", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}
	}

	_, err = c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(0)}, event())
	got, ok := actualVersion(clientMessage(err))
	require.True(t, ok, "%v", err)
	require.Equal(t, eventstore.NoStreamVersion, got)

	_, err = c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, event(), event())
	require.NoError(t, err)
	_, err = c.AppendToStream(t.Context(), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, event())
	got, ok = actualVersion(clientMessage(err))
	require.True(t, ok, "%v", err)
	require.Equal(t, int64(1), got)
	require.ErrorIs(t, interpretError("append s", err), eventstore.ErrWrongExpectedVersion)
}

// TestWrongVersionFallsBackToReadingTheStream: should the client's message
// ever change form, the actual version is read from the stream.
func TestWrongVersionFallsBackToReadingTheStream(t *testing.T) {
	srv := kurrenttest.Start(t)
	s, err := Open(t.Context(), Config{URL: srv.DirectURL(), StreamPrefixes: []string{"s-"}})
	require.NoError(t, err)
	defer s.Close()
	events := []eventstore.EventData{
		{ID: uuid.NewString(), Type: "T"}, {ID: uuid.NewString(), Type: "T"}, {ID: uuid.NewString(), Type: "T"},
	}
	_, err = s.Append(t.Context(), "s-1", eventstore.NoStream(), events)
	require.NoError(t, err)

	for stream, want := range map[string]int64{"s-1": 2, "s-missing": eventstore.NoStreamVersion} {
		err := s.wrongVersion(t.Context(), stream, eventstore.Exact(0), errors.New("a message of another form"))
		var wev *eventstore.WrongExpectedVersionError
		require.ErrorAs(t, err, &wev, stream)
		require.Equal(t, want, wev.Actual, stream)
		require.Equal(t, stream, wev.Stream)
	}
}
