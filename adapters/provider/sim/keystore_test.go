package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeyStoreForgetsInTimeOrderPayingOnlyForTheExpired: 10,000 keys a
// second apart under a one-hour retention; each forget examines only the
// keys that expired since the last one (a walk of every key would examine
// 10,000 each time), and the oldest go first.
func TestKeyStoreForgetsInTimeOrderPayingOnlyForTheExpired(t *testing.T) {
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	k := newKeyStore[*keyRecord](time.Hour)
	const n = 10_000
	for i := range n {
		k.put(fmt.Sprintf("k%d", i), &keyRecord{firstSeen: at.Add(time.Duration(i) * time.Second)})
	}

	require.Zero(t, k.forget(at.Add(time.Hour-time.Nanosecond)), "nothing expired: nothing examined")
	require.Equal(t, n, k.len())

	// One hour and 100 seconds in: keys 0..100 are an hour old or more.
	require.Equal(t, 101, k.forget(at.Add(time.Hour+100*time.Second)))
	require.Equal(t, n-101, k.len())
	_, ok := k.get("k100", at.Add(time.Hour+100*time.Second))
	require.False(t, ok, "the oldest are forgotten first")
	_, ok = k.get("k101", at.Add(time.Hour+100*time.Second))
	require.True(t, ok, "the younger are kept")

	for step := range 50 {
		now := at.Add(time.Hour + time.Duration(101+step)*time.Second)
		require.Equal(t, 1, k.forget(now), "one key expired per second: one examined")
	}
	require.Equal(t, n-151, k.len())
	require.LessOrEqual(t, len(k.queue)-k.head, n-151, "the queue holds no more than the keys kept")
}

// TestKeyStoreKeepsAnExecutingKeyPastItsRetention: a request still executing
// keeps its key; the keys behind it are forgotten on time all the same, and
// it is forgotten once it ends.
func TestKeyStoreKeepsAnExecutingKeyPastItsRetention(t *testing.T) {
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	k := newKeyStore[*keyRecord](time.Hour)
	busy := &keyRecord{firstSeen: at, inProgress: true}
	k.put("busy", busy)
	k.put("done", &keyRecord{firstSeen: at.Add(time.Second)})
	k.put("young", &keyRecord{firstSeen: at.Add(time.Hour)})

	k.forget(at.Add(time.Hour + time.Second))
	got, ok := k.get("busy", at.Add(time.Hour+time.Second))
	require.True(t, ok, "executing: kept")
	require.Same(t, busy, got)
	_, ok = k.get("done", at.Add(time.Hour+time.Second))
	require.False(t, ok, "the key behind it expired on time")
	require.Equal(t, 2, k.len())

	busy.inProgress = false
	_, ok = k.get("busy", at.Add(time.Hour+time.Second))
	require.False(t, ok, "ended and expired: forgotten at its next look-up")
	k.forget(at.Add(2 * time.Hour))
	require.Zero(t, k.len())
	require.Equal(t, k.head, len(k.queue), "nothing left queued")
}

// TestKeyStoreSkipsAKeyPutAgain: a key forgotten at a look-up and put again
// is not forgotten by its old queue entry.
func TestKeyStoreSkipsAKeyPutAgain(t *testing.T) {
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	k := newKeyStore[*keyRecord](time.Hour)
	k.put("k", &keyRecord{firstSeen: at})
	later := at.Add(time.Hour)
	_, ok := k.get("k", later)
	require.False(t, ok)
	again := &keyRecord{firstSeen: later}
	k.put("k", again)
	k.forget(later.Add(time.Minute))
	got, ok := k.get("k", later.Add(time.Minute))
	require.True(t, ok)
	require.Same(t, again, got)
}
