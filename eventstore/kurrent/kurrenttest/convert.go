package kurrenttest

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
)

// Metadata keys of the Streams API (EventStore.Core's Constants.Metadata).
const (
	metadataType        = "type"
	metadataContentType = "content-type"
	metadataCreated     = "created"
)

// fromProtoUUID decodes an event id in either wire form: two big-endian
// halves ("structured") or the string form.
func fromProtoUUID(id *shared.UUID) (uuid.UUID, error) {
	if s := id.GetStructured(); s != nil {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], uint64(s.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(b[8:], uint64(s.GetLeastSignificantBits()))
		return uuid.UUID(b), nil
	}
	if s := id.GetString_(); s != "" {
		return uuid.Parse(s)
	}
	return uuid.Nil, fmt.Errorf("event id missing")
}

// toProtoUUID encodes id in the form the reader asked for.
func toProtoUUID(id uuid.UUID, structured bool) *shared.UUID {
	if !structured {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id.String()}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(id[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(id[8:])),
	}}}
}

// ticksSinceEpoch is how KurrentDB sends "created": 100 ns ticks since the
// Unix epoch.
func ticksSinceEpoch(r *record) string {
	return strconv.FormatInt(r.created.UnixNano()/100, 10)
}

// toReadEvent renders a record as a Read response event.
func toReadEvent(r *record, structured bool) *streams.ReadResp {
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               toProtoUUID(r.id, structured),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   uint64(r.number),
			PreparePosition:  r.pos,
			CommitPosition:   r.pos,
			Metadata: map[string]string{
				metadataType:        r.eventType,
				metadataContentType: r.contentType,
				metadataCreated:     ticksSinceEpoch(r),
			},
			CustomMetadata: r.metadata,
			Data:           r.data,
		},
		Position: &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.pos},
	}}}
}

// structuredIDs reports whether a reader asked for ids in structured form
// (the default when it says nothing, as in KurrentDB).
func structuredIDs(opts *streams.ReadReq_Options) bool {
	return opts.GetUuidOption().GetString_() == nil
}
