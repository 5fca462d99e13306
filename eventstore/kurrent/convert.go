package kurrent

import (
	"fmt"
	"math"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// batch is an append's events, validated, with their content digests.
type batch struct {
	events   []eventstore.EventData
	uuids    []uuid.UUID
	contents []chain.Hash
}

// newBatch validates events beyond eventstore.ValidateAppend: ids must be
// UUIDs in canonical lowercase form (the form they are read back in) and
// not the nil UUID (for which the client would silently mint a random id,
// defeating deduplication); data and metadata, when present, must be JSON
// that chain.Canonicalize accepts (the events are marked as JSON, as
// opledger's are).
func newBatch(stream string, events []eventstore.EventData) (batch, error) {
	b := batch{events: events, uuids: make([]uuid.UUID, len(events)), contents: make([]chain.Hash, len(events))}
	for i, e := range events {
		id, err := uuid.Parse(e.ID)
		if err != nil || id.String() != e.ID || id == uuid.Nil {
			return batch{}, fmt.Errorf("append %s: %w: event %d: id %q is not a lowercase canonical non-nil UUID", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		c, err := chain.Content(stream, e.ID, e.Type, e.Data, e.Metadata)
		if err != nil {
			return batch{}, fmt.Errorf("append %s: %w: event %d (%s): %w", stream, eventstore.ErrInvalidAppend, i, e.ID, err)
		}
		b.uuids[i], b.contents[i] = id, c
	}
	return b, nil
}

func (b batch) ids() []string {
	out := make([]string, len(b.events))
	for i, e := range b.events {
		out[i] = e.ID
	}
	return out
}

// eventData converts the batch for the client, linked after h: each
// event's custom metadata is the envelope carrying its link (see chain.go).
func (b batch) eventData(h head) []esdb.EventData {
	out := make([]esdb.EventData, len(b.events))
	links := chain.Links(h.hash, h.version+1, b.contents)
	prev := h.hash
	for i, e := range b.events {
		out[i] = esdb.EventData{EventID: b.uuids[i], EventType: e.Type, ContentType: esdb.ContentTypeJson,
			Data: nilIfEmpty(e.Data), Metadata: wrapMetadata(e.Metadata, prev, links[i])}
		prev = links[i]
	}
	return out
}

// recorded converts an event the server sent for stream (its port name).
func recorded(stream string, e *esdb.RecordedEvent) (eventstore.RecordedEvent, error) {
	if e.EventNumber > math.MaxInt64 {
		return eventstore.RecordedEvent{}, fmt.Errorf("event %s of %s: revision %d out of range", e.EventID, stream, e.EventNumber)
	}
	metadata, prev, hash, _ := unwrapMetadata(nilIfEmpty(e.UserMetadata))
	return eventstore.RecordedEvent{
		StreamID:   stream,
		Version:    int64(e.EventNumber),
		ID:         e.EventID.String(),
		Type:       e.EventType,
		Data:       nilIfEmpty(e.Data),
		Metadata:   metadata,
		RecordedAt: e.CreatedDate.UTC(),
		Position:   fromClientPosition(e.Position),
		PrevHash:   prev,
		Hash:       hash,
	}, nil
}

// nilIfEmpty: the wire does not tell an empty payload from a missing one;
// the store reads both back as nil.
func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
