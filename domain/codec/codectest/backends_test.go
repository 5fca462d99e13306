package codectest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/codec"
	"opledger/domain/codec/codectest"
	"opledger/eventstore"
	"opledger/eventstore/kurrent"
	"opledger/eventstore/kurrent/kurrenttest"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

// backends open a fresh, empty store of each kind: the in-memory store,
// PostgreSQL, and the KurrentDB test server (eventstore/kurrent/kurrenttest).
var backends = []struct {
	name string
	open func(t *testing.T) eventstore.Store
}{
	{"memory", func(t *testing.T) eventstore.Store { return memory.New(nil) }},
	{"postgres", func(t *testing.T) eventstore.Store { return pgtest.OpenStore(t) }},
	{"kurrent", func(t *testing.T) eventstore.Store {
		s, err := kurrent.Open(t.Context(), kurrent.Config{URL: kurrenttest.Start(t).URL()})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}},
}

// visibleBound bounds waiting for appended events to show in the global
// log (PostgreSQL withholds them while an older transaction anywhere on
// the server is open).
const visibleBound = 30 * time.Second

// readAll polls the global log, with a bounded back-off, until it holds n
// events, and returns them.
func readAll(t *testing.T, store eventstore.Store, n int) []eventstore.RecordedEvent {
	t.Helper()
	deadline := time.Now().Add(visibleBound)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		recs, err := store.ReadAll(t.Context(), nil, n+1)
		require.NoError(t, err)
		if len(recs) >= n {
			return recs
		}
		require.True(t, time.Now().Before(deadline), "the log shows %d of %d events after %s", len(recs), n, visibleBound)
		time.Sleep(pause) // polling a condition with a bound
	}
}

// TestEveryBackendKeepsTheFixturesReadable: every log fixture, appended
// through every backend, comes back as it was written (streams, versions,
// ids, types, global order), and every event of it decodes as it does
// straight from the fixture. So does every event fixture, each in a
// stream of its own. What a backend does to the stored JSON (PostgreSQL
// keeps it as jsonb: members reordered, spaces added) changes nothing the
// codec reads.
func TestEveryBackendKeepsTheFixturesReadable(t *testing.T) {
	names, err := codectest.Logs()
	require.NoError(t, err)
	fixtures, err := codectest.Fixtures()
	require.NoError(t, err)
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for _, name := range names {
				t.Run(name, func(t *testing.T) {
					_, log, err := codectest.Log(name)
					require.NoError(t, err)
					store := b.open(t)
					require.NoError(t, codectest.AppendLog(t.Context(), store, log))
					recs := readAll(t, store, len(log))
					require.Len(t, recs, len(log))
					for i, rec := range recs {
						want := log[i]
						require.Equal(t, []any{want.Stream, want.Version, want.ID, want.Type}, []any{rec.StreamID, rec.Version, rec.ID, rec.Type}, "event %d", i)
						requireSameReading(t, want.Type, want.Data, want.Metadata, rec, fmt.Sprintf("%s event %d", name, i))
					}
					for stream, n := range codectest.Streams(log) {
						page, err := store.ReadStream(t.Context(), stream, 0, int(n)+1)
						require.NoError(t, err)
						require.Len(t, page, int(n), stream)
					}
				})
			}
			t.Run("event-fixtures", func(t *testing.T) {
				store := b.open(t)
				for i, f := range fixtures {
					stream := fmt.Sprintf("operation-OP-FIXTURE-%d", i)
					_, err := store.Append(t.Context(), stream, eventstore.NoStream(), []eventstore.EventData{f.EventData()})
					require.NoError(t, err, f.Path)
					page, err := store.ReadStream(t.Context(), stream, 0, 2)
					require.NoError(t, err)
					require.Len(t, page, 1)
					require.Equal(t, f.ID, page[0].ID)
					requireSameReading(t, f.Type, f.Data, f.Metadata, page[0], f.Path)
				}
			})
		})
	}
}

// requireSameReading: rec, as a backend returned it, decodes exactly as
// the stored event it was appended from.
func requireSameReading(t *testing.T, typ string, data, meta []byte, rec eventstore.RecordedEvent, what string) {
	t.Helper()
	want, err := codec.Decode(typ, data, meta)
	require.NoError(t, err, what)
	got, err := codec.DecodeRecorded(rec)
	require.NoError(t, err, what)
	require.Equal(t, want, got, what)
}
