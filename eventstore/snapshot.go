package eventstore

import "context"

// Snapshot is a derived copy of what a stream folds into at one version,
// kept by a SnapshotStore so that a reader need not fold a long stream from
// its first event. It is never the source of truth: the events are. A
// reader checks it against the stream (the event at Version must exist and
// carry Hash) and falls back to the events when it does not match.
type Snapshot struct {
	StreamID string
	Version  int64  // the version of the last event folded
	Hash     []byte // that event's hash (RecordedEvent.Hash)
	Format   string // what State is an encoding of; a reader ignores formats it does not write
	State    []byte
}

// SnapshotStore keeps at most one snapshot per stream. Backends that can
// keep them next to the events implement it (PostgreSQL: migration 003);
// callers check for it with a type assertion and do without.
type SnapshotStore interface {
	// LoadSnapshot returns stream's snapshot, if one is kept (ok false
	// otherwise).
	LoadSnapshot(ctx context.Context, stream string) (s Snapshot, ok bool, err error)
	// SaveSnapshot keeps s, replacing a snapshot of an older version or of
	// another format; a newer one of the same format is kept instead.
	SaveSnapshot(ctx context.Context, s Snapshot) error
}
