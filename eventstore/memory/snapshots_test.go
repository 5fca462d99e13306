package memory_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// TestSnapshotsKeepTheNewest: one snapshot per stream, the newest of a
// format, and a snapshot of another format replaces it whatever its
// version (as the PostgreSQL backend's).
func TestSnapshotsKeepTheNewest(t *testing.T) {
	ctx := t.Context()
	var s memory.Snapshots
	_, ok, err := s.LoadSnapshot(ctx, "a")
	require.NoError(t, err)
	require.False(t, ok)
	save := func(version int64, format string) {
		require.NoError(t, s.SaveSnapshot(ctx, eventstore.Snapshot{StreamID: "a", Version: version, Format: format, Hash: []byte{1}, State: []byte("x")}))
	}
	load := func() eventstore.Snapshot {
		snap, ok, err := s.LoadSnapshot(ctx, "a")
		require.NoError(t, err)
		require.True(t, ok)
		return snap
	}
	save(10, "f1")
	save(5, "f1")
	require.EqualValues(t, 10, load().Version, "an older snapshot of the same format is not kept")
	save(3, "f2")
	require.Equal(t, "f2", load().Format, "another format replaces it")
	require.EqualValues(t, 3, load().Version)
	got := load()
	got.State[0] = 'y'
	require.Equal(t, []byte("x"), load().State, "a snapshot loaded shares nothing with the one kept")
	require.Equal(t, 2, s.Saved())
}
