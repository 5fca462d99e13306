package kurrent_test

import (
	"testing"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
)

// TestKurrentIdempotency pins what KurrentDB deduplicates and refuses, as
// the store passes it through. Run against a real server (KURRENTDB_URL), it
// also checks that the test server's commit check is KurrentDB's.
//
// Deduplicated: a retry of an append with the same ids at the expected
// version it was written at (exact, no-stream, or any while the server's
// cache holds the ids), and a prefix of one. Refused: a retry whose ids sit
// elsewhere than expected, and a batch only part of which is stored.
// Written again (where the Postgres and memory backends refuse): ids already
// in the stream appended at its current version, and ids of another stream.
func TestKurrentIdempotency(t *testing.T) {
	onTargets(t, func(t *testing.T, tg target) {
		s := openStore(t, kurrent.Config{URL: tg.direct(t), Namespace: newNamespace(t), StreamPrefixes: everyStream})
		ctx := t.Context()
		stream := "idem-" + uuid.NewString()[:8]
		first, second, third := newEvents(1), newEvents(2), newEvents(1)

		require.Equal(t, int64(0), mustAppend(t, s, stream, eventstore.NoStream(), first))
		require.Equal(t, int64(0), mustAppend(t, s, stream, eventstore.NoStream(), first), "no-stream retry")
		require.Equal(t, int64(2), mustAppend(t, s, stream, eventstore.Exact(0), second))
		require.Equal(t, int64(2), mustAppend(t, s, stream, eventstore.Exact(0), second), "exact retry")
		require.Equal(t, int64(1), mustAppend(t, s, stream, eventstore.Exact(0), second[:1]), "a prefix of an append is a retry of it")
		require.Equal(t, int64(3), mustAppend(t, s, stream, eventstore.Any(), third))
		require.Equal(t, int64(3), mustAppend(t, s, stream, eventstore.Any(), third), "any retry (from the server's cache)")

		_, err := s.Append(ctx, stream, eventstore.Exact(1), second) // they sit at 1, 2; this would put them at 2, 3
		requireWrongVersion(t, err, eventstore.Exact(1), 3)
		partly := append([]eventstore.EventData{second[1]}, newEvents(1)...)
		_, err = s.Append(ctx, stream, eventstore.Exact(1), partly) // second[1] sits at 2, the new one is not at 3
		requireWrongVersion(t, err, eventstore.Exact(1), 3)
		_, err = s.Append(ctx, stream, eventstore.Any(), partly)
		requireWrongVersion(t, err, eventstore.Any(), 3)
		got, err := s.ReadStream(ctx, stream, 0, 100)
		require.NoError(t, err)
		require.Len(t, got, 4, "nothing was written by the refusals and the retries")

		// What KurrentDB does not refuse.
		require.Equal(t, int64(4), mustAppend(t, s, stream, eventstore.Exact(3), first), "a stored id at the current version is written again")
		other := "idem-other-" + uuid.NewString()[:8]
		require.Equal(t, int64(0), mustAppend(t, s, other, eventstore.NoStream(), first), "another stream's id is written")
	})
}

// TestSubscriptionSemantics pins what ReadAll relies on, with the client
// itself: a subscription to $all from an event's position starts strictly
// after it, the filter on stream prefixes keeps other streams out, and
// caught-up follows the last event present.
func TestSubscriptionSemantics(t *testing.T) {
	onTargets(t, func(t *testing.T, tg target) {
		url, ns := tg.direct(t), newNamespace(t)
		s := openStore(t, kurrent.Config{URL: url, Namespace: ns, StreamPrefixes: []string{"mine-"}})
		mine := "mine-" + uuid.NewString()[:8]
		events := newEvents(3)
		mustAppend(t, s, mine, eventstore.NoStream(), events)
		raw := rawClient(t, url)
		_, err := raw.AppendToStream(t.Context(), ns+"theirs-1", esdb.AppendToStreamOptions{}, esdb.EventData{
			EventID: uuid.New(), EventType: "Other", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`),
		})
		require.NoError(t, err)

		all, err := s.ReadAll(t.Context(), nil, 10)
		require.NoError(t, err)
		require.Equal(t, ids(events), recordedIDs(all), "only the store's streams")
		from := all[0].Position.(kurrent.Position)

		sub, err := raw.SubscribeToAll(t.Context(), esdb.SubscribeToAllOptions{
			From:   esdb.Position{Commit: from.Commit, Prepare: from.Prepare},
			Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{ns + "mine-"}},
		})
		require.NoError(t, err)
		defer sub.Close()
		var got []string
		for range 1000 { // bounded: checkpoints and two events, then caught-up
			m := sub.Recv()
			require.Nil(t, m.SubscriptionDropped, "dropped")
			if m.EventAppeared != nil {
				got = append(got, m.EventAppeared.OriginalEvent().EventID.String())
			}
			if m.CaughtUp != nil {
				break
			}
		}
		require.Equal(t, ids(events[1:]), got, "strictly after the position, then caught-up")
	})
}
