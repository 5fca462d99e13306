package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// Append implements eventstore.Store with one AppendToStream call, the
// expected version mapped by toExpectedRevision and the event ids sent as
// the events' KurrentDB ids, so the server deduplicates a retry (see the
// package doc for what it does and does not deduplicate). A wrong expected
// version becomes a *eventstore.WrongExpectedVersionError with the stream's
// revision as the server reported it.
//
// The events are linked into the stream's hash chain (see chain.go), which
// needs the hash of the event they follow: an exact append reads the event
// at its expected version first (one read more than the append itself; a
// stream without that event is refused as a wrong expected version); an
// append with expected version Any reads the stream's tail for a retry and
// then appends at the exact version it found (appendAny).
//
// A fence (eventstore.ExpectedVersion.Beside) is read just before the
// append: KurrentDB has no condition on a second stream, so an append and
// a loss of the fenced event between the two are not told apart. A
// KurrentDB cluster acknowledges a write once a quorum holds it, so it
// loses no acknowledged event in a failover, which is what fences guard
// against on the other backends.
//
// Beyond eventstore.ValidateAppend, the stream must be in the store's
// categories (Config.StreamPrefixes), event ids must be lowercase canonical
// UUIDs and Data and Metadata must be JSON that chain.Canonicalize accepts
// (or nil); an append the server refuses as malformed or too large
// (KurrentDB's MaxAppendSize, 1 MiB by default) wraps
// eventstore.ErrInvalidAppend too.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if err := eventstore.ValidateAppend(stream, events); err != nil {
		return eventstore.AppendResult{}, err
	}
	if err := s.names.checkStream(stream, true); err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s: %w: %v", stream, eventstore.ErrInvalidAppend, err)
	}
	b, err := newBatch(stream, events)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	if f, ok := expected.Fence(); ok {
		page, err := s.ReadStream(ctx, f.Stream, max(f.Version, 0), 1)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if !f.Holds(page) {
			return eventstore.AppendResult{}, &eventstore.FenceError{Stream: stream, Fence: f}
		}
	}
	h := head{version: eventstore.NoStreamVersion, hash: chain.Genesis}
	switch v, exact := expected.Version(); {
	case expected.IsAny():
		return s.appendAny(ctx, stream, b)
	case exact:
		var found bool
		var actual int64
		if h, found, actual, err = s.headAt(ctx, stream, v); err != nil {
			return eventstore.AppendResult{}, err
		}
		if !found {
			return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
		}
	}
	return s.appendAt(ctx, stream, expected, b, h)
}

// appendAny runs an append with expected version Any as an exact append at
// the stream's head, after looking for a retry of it in the stream's tail
// (answered as a success again; some but not all of its ids there are
// refused, as KurrentDB refuses them). A lost race is tried again, at most
// maxAnyAttempts times.
func (s *Store) appendAny(ctx context.Context, stream string, b batch) (eventstore.AppendResult, error) {
	ids := b.ids()
	for range maxAnyAttempts {
		h, found, err := s.scanForRetry(ctx, stream, ids)
		if err != nil {
			return eventstore.AppendResult{}, err
		}
		if len(found) > 0 {
			first, ok := found[ids[0]]
			for k, id := range ids {
				at, stored := found[id]
				ok = ok && stored && at == first+int64(k)
			}
			if !ok {
				return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: eventstore.Any(), Actual: h.version}
			}
			return eventstore.AppendResult{NextExpectedVersion: first + int64(len(ids)) - 1}, nil
		}
		res, err := s.appendAt(ctx, stream, eventstore.Exact(h.version), b, h)
		if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
			return res, err
		}
	}
	return eventstore.AppendResult{}, eventstore.Unavailable("append "+stream, fmt.Errorf("lost the race for the stream's next version %d times in a row", maxAnyAttempts))
}

// appendAt appends the batch linked after h, at expected.
func (s *Store) appendAt(ctx context.Context, stream string, expected eventstore.ExpectedVersion, b batch, h head) (eventstore.AppendResult, error) {
	revision, err := toExpectedRevision(expected)
	if err != nil {
		return eventstore.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	data := b.eventData(h)
	op := "append " + stream
	var result *esdb.WriteResult
	err = s.call(ctx, op, func(ctx context.Context, es *esdb.Client) error {
		opts := esdb.AppendToStreamOptions{ExpectedRevision: revision, Deadline: &s.cfg.CallTimeout}
		r, err := es.AppendToStream(ctx, s.names.server(stream), opts, data...)
		result = r
		return err
	})
	switch {
	case errors.Is(err, eventstore.ErrWrongExpectedVersion):
		return eventstore.AppendResult{}, s.wrongVersion(ctx, stream, expected, err)
	case err != nil && isRefusedAppend(err):
		return eventstore.AppendResult{}, fmt.Errorf("%w: the server refused it: %w", eventstore.ErrInvalidAppend, err)
	case err != nil:
		return eventstore.AppendResult{}, err
	}
	next := int64(result.NextExpectedVersion)
	if want, ok := nextVersion(expected, len(b.events)); ok && next != want {
		// The server accepted an append at an exact version but reports the
		// stream elsewhere: the mapping is broken. Fail loudly.
		return eventstore.AppendResult{}, fmt.Errorf("%s: bug: server reports revision %d after %d events at %s, want %d", op, next, len(b.events), expected, want)
	}
	return eventstore.AppendResult{NextExpectedVersion: next}, nil
}

// wrongVersion builds the port's error for a refused append. The stream's
// revision comes from the client's message; should its form ever change,
// it is read from the stream instead (which may be later than the revision
// the server refused at, never earlier).
func (s *Store) wrongVersion(ctx context.Context, stream string, expected eventstore.ExpectedVersion, cause error) error {
	actual, ok := actualVersion(clientMessage(cause))
	if !ok {
		var err error
		if actual, err = s.lastVersion(ctx, stream); err != nil {
			return fmt.Errorf("%w; reading the stream's version: %w", cause, err)
		}
	}
	return &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
}

// clientMessage is the message of the client error in err's chain.
func clientMessage(err error) string {
	var esErr *esdb.Error
	if errors.As(err, &esErr) && esErr.Err() != nil {
		return esErr.Err().Error()
	}
	return ""
}

// lastVersion reads stream's current version: its last event's revision,
// or NoStreamVersion.
func (s *Store) lastVersion(ctx context.Context, stream string) (int64, error) {
	version := eventstore.NoStreamVersion
	err := s.call(ctx, "read version of "+stream, func(ctx context.Context, es *esdb.Client) error {
		opts := esdb.ReadStreamOptions{Direction: esdb.Backwards, From: esdb.End{}, Deadline: &s.cfg.CallTimeout}
		rs, err := es.ReadStream(ctx, s.names.server(stream), opts, 1)
		if err != nil {
			return err
		}
		defer rs.Close()
		ev, err := rs.Recv()
		switch {
		case errors.Is(err, io.EOF), isNotFound(err):
			return nil
		case err != nil:
			return err
		}
		version = int64(ev.OriginalEvent().EventNumber)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return version, nil
}
