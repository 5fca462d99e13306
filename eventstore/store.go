// Package eventstore is the port through which opledger persists and reads events.
//
// A Store holds named streams of immutable events and a global log over all of
// them. Backends live in subpackages (memory, postgres, kurrent) and all pass the
// conformance suite in storetest, which includes the hash chain every event
// carries (see package chain). Callers depend only on this package.
//
// Versions are 0-based revisions, as in KurrentDB: the first event of a stream
// has version 0, and a stream holding n events has version n-1. A stream that
// holds no events has version NoStreamVersion (-1).
package eventstore

import (
	"context"
	"fmt"
	"time"
)

// NoStreamVersion is the version reported for a stream that holds no events.
const NoStreamVersion int64 = -1

// MaxAppendBatch bounds how many events one Append may write. A command never
// produces more than a handful; the bound keeps a runaway caller from building
// an unbounded statement.
const MaxAppendBatch = 1000

// EventData is an event to be appended. ID is chosen by the caller and is what
// makes a retried append idempotent: re-appending the same IDs at the same
// versions succeeds without writing them twice.
type EventData struct {
	ID       string // a UUID, unique across the whole store
	Type     string // stable type name, e.g. "Claimed"
	Data     []byte // JSON
	Metadata []byte // JSON
}

// RecordedEvent is an event as the store holds it.
type RecordedEvent struct {
	StreamID   string
	Version    int64 // 0-based revision within the stream
	ID         string
	Type       string
	Data       []byte
	Metadata   []byte
	RecordedAt time.Time // the store's clock at append
	Position   Position  // where the event sits in the global log
	// PrevHash and Hash are the event's link in its stream's hash chain
	// (see package chain): the hash of the event before it (chain.Genesis
	// for the first) and its own, 32 bytes each, computed by the backend at
	// append. Both are nil for an event stored before hashing began.
	PrevHash []byte
	Hash     []byte
}

// AppendResult reports where an append left the stream.
type AppendResult struct {
	// NextExpectedVersion is the version of the last event written, to be
	// passed as Exact(...) by the next append that decided on this state.
	NextExpectedVersion int64
}

// Store is the event store port.
//
// Implementations are safe for concurrent use by multiple goroutines. Every
// method honours its context. When the backing store cannot be reached, or a
// call's outcome cannot be established because the connection failed, methods
// return an error wrapping ErrUnavailable; callers must then assume nothing
// about what was or was not written, except that a retried Append with the
// same event IDs and expected version is safe.
type Store interface {
	// Append writes events to the end of stream if the stream's current
	// version matches expected, each with its link in the stream's hash
	// chain (RecordedEvent.PrevHash, Hash); otherwise it returns a *WrongExpectedVersionError
	// (errors.Is(err, ErrWrongExpectedVersion)) and writes nothing. The events
	// of one Append are written atomically and receive consecutive versions.
	// If every event ID was already appended to this stream at the versions
	// this call would give them, Append succeeds without writing anything.
	// events must hold 1..MaxAppendBatch entries, and their Data and
	// Metadata must be nil or JSON that chain.Canonicalize accepts (else
	// ErrInvalidAppend).
	Append(ctx context.Context, stream string, expected ExpectedVersion, events []EventData) (AppendResult, error)

	// ReadStream returns up to limit events of stream with version >= from, in
	// version order. A stream that does not exist reads as empty.
	ReadStream(ctx context.Context, stream string, from int64, limit int) ([]RecordedEvent, error)

	// ReadAll returns up to limit events of the global log strictly after
	// position after (nil: from the start), in global order. It never returns
	// an event while an event that will be ordered before it may still be
	// committed: a reader that checkpoints the last position it received never
	// skips an event.
	ReadAll(ctx context.Context, after Position, limit int) ([]RecordedEvent, error)

	// ParsePosition decodes a position this backend produced with String().
	ParsePosition(s string) (Position, error)

	// Close releases the store's resources. Calls in flight may fail.
	Close()
}

// Header is what a Store may also offer (the PostgreSQL store does): Head
// returns the position of the last event ReadAll can return now, the log's
// committed end as readers see it, or a position that compares equal to the
// start of the log (nil included) when no event is visible yet. Lag
// measures ask it to answer "caught up" without reading an event; callers
// must work without it.
type Header interface {
	Head(ctx context.Context) (Position, error)
}

// Position is a point in a backend's global log. Each backend defines its own
// (Postgres: transaction id and global position; KurrentDB: commit and
// prepare positions). Positions serialize with String and parse back with the
// same backend's Store.ParsePosition.
type Position interface {
	fmt.Stringer
	// Compare orders this position against another of the same backend:
	// negative if p is before other, 0 if equal, positive if after. A nil
	// other is the start of the log.
	Compare(other Position) int
}
