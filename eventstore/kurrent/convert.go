package kurrent

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"opledger/eventstore"
)

// toEventData validates events beyond eventstore.ValidateAppend and
// converts them for the client: ids must be UUIDs in canonical lowercase
// form (the form they are read back in) and not the nil UUID (for which the
// client would silently mint a random id, defeating deduplication); data
// and metadata, when present, must be JSON (the events are marked as JSON,
// as opledger's are).
func toEventData(stream string, events []eventstore.EventData) ([]esdb.EventData, error) {
	out := make([]esdb.EventData, len(events))
	for i, e := range events {
		id, err := uuid.Parse(e.ID)
		if err != nil || id.String() != e.ID || id == uuid.Nil {
			return nil, fmt.Errorf("append %s: %w: event %d: id %q is not a lowercase canonical non-nil UUID", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		if e.Data != nil && !json.Valid(e.Data) {
			return nil, fmt.Errorf("append %s: %w: event %d (%s): data is not JSON", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		if e.Metadata != nil && !json.Valid(e.Metadata) {
			return nil, fmt.Errorf("append %s: %w: event %d (%s): metadata is not JSON", stream, eventstore.ErrInvalidAppend, i, e.ID)
		}
		out[i] = esdb.EventData{EventID: id, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: e.Data, Metadata: e.Metadata}
	}
	return out, nil
}

// recorded converts an event the server sent for stream (its port name).
func recorded(stream string, e *esdb.RecordedEvent) (eventstore.RecordedEvent, error) {
	if e.EventNumber > math.MaxInt64 {
		return eventstore.RecordedEvent{}, fmt.Errorf("event %s of %s: revision %d out of range", e.EventID, stream, e.EventNumber)
	}
	return eventstore.RecordedEvent{
		StreamID:   stream,
		Version:    int64(e.EventNumber),
		ID:         e.EventID.String(),
		Type:       e.EventType,
		Data:       nilIfEmpty(e.Data),
		Metadata:   nilIfEmpty(e.UserMetadata),
		RecordedAt: e.CreatedDate.UTC(),
		Position:   fromClientPosition(e.Position),
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
