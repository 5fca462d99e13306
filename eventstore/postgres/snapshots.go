package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// MaxSnapshotBytes bounds one snapshot's state: a larger one is not kept
// (the stream is then folded from its events, as without snapshots).
const MaxSnapshotBytes = 1 << 20

// LoadSnapshot implements eventstore.SnapshotStore (table snapshots,
// migration 003).
func (s *Store) LoadSnapshot(ctx context.Context, stream string) (eventstore.Snapshot, bool, error) {
	snap := eventstore.Snapshot{StreamID: stream}
	err := s.pool.QueryRow(ctx, s.sql.loadSnapshot, stream).Scan(&snap.Version, &snap.Hash, &snap.Format, &snap.State)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.Snapshot{}, false, nil
	}
	if err != nil {
		return eventstore.Snapshot{}, false, interpretError("load snapshot "+stream, err)
	}
	return snap, true, nil
}

// SaveSnapshot implements eventstore.SnapshotStore. A snapshot without a
// 32-byte hash (its event was stored before hashing began: it could not be
// checked) or larger than MaxSnapshotBytes is refused.
func (s *Store) SaveSnapshot(ctx context.Context, snap eventstore.Snapshot) error {
	switch {
	case len(snap.Hash) != 32:
		return fmt.Errorf("save snapshot %s: %w: the event at version %d has no hash to check the snapshot against", snap.StreamID, eventstore.ErrInvalidAppend, snap.Version)
	case len(snap.State) > MaxSnapshotBytes:
		return fmt.Errorf("save snapshot %s: %w: %d bytes, at most %d", snap.StreamID, eventstore.ErrInvalidAppend, len(snap.State), MaxSnapshotBytes)
	case snap.Version < 0 || snap.Format == "":
		return fmt.Errorf("save snapshot %s: %w: version %d, format %q", snap.StreamID, eventstore.ErrInvalidAppend, snap.Version, snap.Format)
	}
	if _, err := s.pool.Exec(ctx, s.sql.saveSnapshot, snap.StreamID, snap.Version, snap.Hash, snap.Format, snap.State); err != nil {
		return interpretError("save snapshot "+snap.StreamID, err)
	}
	return nil
}

var _ eventstore.SnapshotStore = (*Store)(nil)
