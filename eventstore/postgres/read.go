package postgres

import (
	"bytes"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// ReadStream implements eventstore.Store. It reads committed events whatever
// their transaction order: a stream's versions are its own order. A limit of
// zero or less reads nothing. Concurrent reads may share a statement
// (groupread.go).
func (s *Store) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	if limit <= 0 {
		return nil, nil
	}
	from = max(from, 0)
	known, cached := s.heads.peek(stream) // before the read: what it must find
	events, err := s.reads.read(ctx, readRequest{stream: stream, from: from, limit: int64(limit)})
	if err != nil {
		return nil, err
	}
	if cached {
		s.checkRead(ctx, stream, known, from, limit, events)
	}
	if n := len(events); n > 0 {
		last := events[n-1]
		s.heads.put(stream, streamHead{version: last.Version, hash: bytes.Clone(last.Hash), id: last.ID})
	}
	return events, nil
}

// ReadAll implements eventstore.Store: up to limit events after the given
// position in (transaction id, global position) order, never past a
// transaction that is still open. A limit of zero or less reads nothing.
// after must be nil or a Position from this package (else
// eventstore.ErrInvalidPosition).
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	from, err := asPosition(after)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql.readAll, from.TransactionID, from.GlobalPosition, limit)
	if err != nil {
		return nil, interpretError("read all", err)
	}
	events, err := collectEvents(rows, limit)
	return events, interpretError("read all", err)
}

// Head returns the position of the last event ReadAll can return now: the
// log's committed end as readers see it, for lag metrics. It is the zero
// Position when no event is visible yet. It implements eventstore.Header.
func (s *Store) Head(ctx context.Context) (eventstore.Position, error) {
	var p Position
	err := s.pool.QueryRow(ctx, s.sql.head).Scan(&p.TransactionID, &p.GlobalPosition)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, interpretError("head", err)
	}
	return p, nil
}

// ReadHeads implements eventstore.HeadReader from the streams table: each
// stream's version and head hash, in stream id order. A limit of zero or
// less reads nothing.
func (s *Store) ReadHeads(ctx context.Context, after string, limit int) ([]eventstore.StreamHead, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql.readHeads, after, limit)
	if err != nil {
		return nil, interpretError("read heads", err)
	}
	heads := make([]eventstore.StreamHead, 0, min(limit, 1000))
	var h eventstore.StreamHead
	_, err = pgx.ForEachRow(rows, []any{&h.StreamID, &h.Version, &h.Hash}, func() error {
		heads = append(heads, h)
		h.Hash = nil
		return nil
	})
	if err != nil {
		return nil, interpretError("read heads", err)
	}
	return heads, nil
}

// firstCapacity is how many events collectEvents makes room for at its
// first row. A read that finds nothing (a relay or projector polling the
// log's end, a hundred times a second) allocates nothing, and a short one
// little: room for up to 1,000 events up front (about 200 KB) was the
// largest allocation of a serve under load. A read that fills it is a page
// of a bulk reader (the projector, audit verify): the slice then grows at
// once to the limit, up to bulkCapacity, instead of doubling through every
// size between (which allocated and copied the page about twice over);
// past bulkCapacity it grows as append does.
const (
	firstCapacity = 64
	bulkCapacity  = 8192
)

// collectEvents scans rows of eventColumns, at most limit of them.
func collectEvents(rows pgx.Rows, limit int) ([]eventstore.RecordedEvent, error) {
	var events []eventstore.RecordedEvent
	var (
		e  eventstore.RecordedEvent
		p  Position
		id string
	)
	_, err := pgx.ForEachRow(rows, []any{&p.GlobalPosition, &p.TransactionID, &e.StreamID, &e.Version, &id, &e.Type, &e.Data, &e.Metadata, &e.RecordedAt, &e.PrevHash, &e.Hash}, func() error {
		e.ID = id
		e.Position = p
		e.RecordedAt = e.RecordedAt.UTC()
		switch {
		case events == nil:
			events = make([]eventstore.RecordedEvent, 0, max(1, min(limit, firstCapacity)))
		case len(events) == firstCapacity && cap(events) == firstCapacity && limit > firstCapacity:
			events = append(make([]eventstore.RecordedEvent, 0, min(limit, bulkCapacity)), events...)
		}
		events = append(events, e)
		e.Data, e.Metadata, e.PrevHash, e.Hash = nil, nil, nil, nil // fresh slices for the next row
		return nil
	})
	if err != nil {
		return nil, err
	}
	if events == nil {
		events = []eventstore.RecordedEvent{} // empty, not nil, as before; allocates nothing
	}
	return events, nil
}
