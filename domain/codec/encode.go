package codec

import (
	"encoding/json"
	"fmt"

	"opledger/domain"
)

// Encoded is an event as it is stored.
type Encoded struct {
	Type     string // the stable type name
	Version  int    // the schema version written (Kind.Write, or above it: Kind.Oldest), stamped in Metadata
	Data     []byte // the event's JSON
	Metadata []byte // the metadata's JSON
}

// Encode writes e and its metadata as this build writes e's type: at the
// type's write version (for a kind that writes the oldest version able to
// say each event, at that version), stamped in the metadata.
func (r *Registry) Encode(e domain.Event, m domain.Metadata) (Encoded, error) {
	if e == nil {
		return Encoded{}, fmt.Errorf("encode: no event")
	}
	k := r.kinds[e.EventType()]
	if k == nil {
		return Encoded{}, fmt.Errorf("encode %T: %w: register it in domain/codec/registry.go", e, ErrUnknownEventType)
	}
	data, version, err := k.encode(e)
	if err != nil {
		return Encoded{}, fmt.Errorf("encode %s: %w", k.Type, err)
	}
	m.SchemaVersion = version
	meta, err := json.Marshal(m)
	if err != nil {
		return Encoded{}, fmt.Errorf("encode %s metadata: %w", k.Type, err)
	}
	return Encoded{Type: k.Type, Version: version, Data: data, Metadata: meta}, nil
}

// EncodeMetadata writes metadata stamped with schema version v, for an
// event whose data is written by other means: a test writing history the
// codec would never write, or a tool copying stored events.
func EncodeMetadata(m domain.Metadata, v int) ([]byte, error) {
	m.SchemaVersion = v
	return json.Marshal(m)
}
