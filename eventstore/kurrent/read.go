package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// ReadStream implements eventstore.Store with one forward read of the
// stream from revision from (the port's version: both count from 0). A
// stream that does not exist reads as empty; a limit of zero or less reads
// nothing. A system stream ("$...") is refused.
func (s *Store) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	op := "read stream " + stream
	if err := s.names.checkStream(stream, false); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if limit <= 0 {
		return nil, nil
	}
	from = max(from, 0)
	return s.readPage(ctx, op, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(uint64(from))}, limit)
}

// readPage reads up to limit events of stream with opts (the deadline is
// the store's); a stream that does not exist reads as empty.
func (s *Store) readPage(ctx context.Context, op, stream string, opts esdb.ReadStreamOptions, limit int) ([]eventstore.RecordedEvent, error) {
	var out []eventstore.RecordedEvent
	err := s.call(ctx, op, func(ctx context.Context, es *esdb.Client) error {
		opts.Deadline = &s.cfg.CallTimeout
		rs, err := es.ReadStream(ctx, s.names.server(stream), opts, uint64(limit))
		if err != nil {
			return err
		}
		defer rs.Close()
		out = make([]eventstore.RecordedEvent, 0, min(limit, 1000))
		// Bounded: the server sends at most limit events, then ends the read.
		for range limit + 1 {
			ev, err := rs.Recv()
			switch {
			case errors.Is(err, io.EOF):
				return nil
			case isNotFound(err):
				out = nil
				return nil
			case err != nil:
				return err
			}
			if len(out) == limit {
				break
			}
			rec, err := recorded(stream, ev.OriginalEvent())
			if err != nil {
				return err
			}
			out = append(out, rec)
		}
		return fmt.Errorf("the server sent more than the %d events asked for", limit)
	})
	if err != nil { // out is the call's only when it returned nil
		return nil, err
	}
	return out, nil
}
