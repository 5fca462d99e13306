package memory

import (
	"context"
	"slices"
	"sync"

	"opledger/eventstore"
)

// Snapshots is an in-memory eventstore.SnapshotStore, kept apart from
// Store so that a store's readers keep snapshots only when given one
// (ledger.Config.Snapshots). Safe for concurrent use; the zero value is
// ready.
type Snapshots struct {
	mu    sync.Mutex
	kept  map[string]eventstore.Snapshot
	saved int
}

// LoadSnapshot implements eventstore.SnapshotStore.
func (s *Snapshots) LoadSnapshot(_ context.Context, stream string) (eventstore.Snapshot, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.kept[stream]
	if !ok {
		return eventstore.Snapshot{}, false, nil
	}
	return copySnapshot(snap), true, nil
}

// SaveSnapshot implements eventstore.SnapshotStore: it keeps snap unless
// the snapshot kept is of snap's format and not older.
func (s *Snapshots) SaveSnapshot(_ context.Context, snap eventstore.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kept == nil {
		s.kept = map[string]eventstore.Snapshot{}
	}
	if old, ok := s.kept[snap.StreamID]; ok && old.Format == snap.Format && old.Version >= snap.Version {
		return nil
	}
	s.kept[snap.StreamID] = copySnapshot(snap)
	s.saved++
	return nil
}

// Saved is how many snapshots SaveSnapshot kept.
func (s *Snapshots) Saved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved
}

func copySnapshot(s eventstore.Snapshot) eventstore.Snapshot {
	s.Hash, s.State = slices.Clone(s.Hash), slices.Clone(s.State)
	return s
}

var _ eventstore.SnapshotStore = (*Snapshots)(nil)
