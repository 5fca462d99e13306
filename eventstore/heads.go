package eventstore

import "context"

// StreamHead is a stream's head as a backend records it apart from the
// events themselves: its version and the hash of its last event (nil when
// that event was stored before hashing began).
type StreamHead struct {
	StreamID string
	Version  int64
	Hash     []byte
}

// HeadReader is implemented by backends that keep each stream's head apart
// from its events (PostgreSQL: the streams table). The audit compares the
// heads with the log, so that an event deleted from the end of a stream is
// caught even without a digest. Heads are read in stream id order, up to
// limit at a time, strictly after the stream id after ("" : from the
// first).
type HeadReader interface {
	ReadHeads(ctx context.Context, after string, limit int) ([]StreamHead, error)
}
