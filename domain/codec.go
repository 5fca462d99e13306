package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Metadata travels beside every event. It says who and why, never what.
type Metadata struct {
	SchemaVersion int           `json:"schema_version"`
	CorrelationID CorrelationID `json:"correlation_id,omitempty"`
	// CausationID is what caused the event: a message id, a request's
	// idempotency key, a sweeper or reconciler run.
	CausationID string    `json:"causation_id,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	RecordedAt  time.Time `json:"recorded_at"`
}

// EncodeEvent returns the stable type name and JSON of an event.
func EncodeEvent(e Event) (string, []byte, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
	}
	return e.EventType(), data, nil
}

// EncodeMetadata returns the JSON of metadata, stamping the schema version.
func EncodeMetadata(m Metadata) ([]byte, error) {
	m.SchemaVersion = SchemaVersion
	return json.Marshal(m)
}

// DecodeMetadata parses metadata; absent metadata decodes as schema 1.
func DecodeMetadata(data []byte) (Metadata, error) {
	var m Metadata
	if len(bytes.TrimSpace(data)) == 0 {
		return Metadata{SchemaVersion: 1}, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return Metadata{}, fmt.Errorf("decode metadata: %w", err)
	}
	if m.SchemaVersion == 0 {
		m.SchemaVersion = 1
	}
	return m, nil
}

// ErrUnknownEventType is wrapped when a stored event's type is not one this
// build knows.
var ErrUnknownEventType = fmt.Errorf("unknown event type")

// DecodeEvent parses a stored event of the given type and schema version.
// Unknown fields are refused: a stored event this build cannot fully read is
// a reason to stop, not to guess.
func DecodeEvent(eventType string, schema int, data []byte) (Event, error) {
	if schema != SchemaVersion {
		return nil, fmt.Errorf("decode %s: schema version %d, this build reads %d", eventType, schema, SchemaVersion)
	}
	switch eventType {
	case TypeOperationRequested:
		return decodeAs[OperationRequested](eventType, data)
	case TypeDecided:
		return decodeAs[Decided](eventType, data)
	case TypeCapabilityIssued:
		return decodeAs[CapabilityIssued](eventType, data)
	case TypeCapabilityRevoked:
		return decodeAs[CapabilityRevoked](eventType, data)
	case TypeClaimed:
		return decodeAs[Claimed](eventType, data)
	case TypeDeliveryDuplicated:
		return decodeAs[DeliveryDuplicated](eventType, data)
	case TypePresentationRejected:
		return decodeAs[PresentationRejected](eventType, data)
	case TypeLeaseRenewed:
		return decodeAs[LeaseRenewed](eventType, data)
	case TypeOutcomeRecorded:
		return decodeAs[OutcomeRecorded](eventType, data)
	case TypeOutcomeUnknown:
		return decodeAs[OutcomeUnknown](eventType, data)
	case TypeLeaseLapsed:
		return decodeAs[LeaseLapsed](eventType, data)
	case TypeLateOutcomeRecorded:
		return decodeAs[LateOutcomeRecorded](eventType, data)
	case TypeReconciled:
		return decodeAs[Reconciled](eventType, data)
	case TypeEscalated:
		return decodeAs[Escalated](eventType, data)
	case TypeWriteRefused:
		return decodeAs[WriteRefused](eventType, data)
	}
	return nil, fmt.Errorf("decode %q: %w", eventType, ErrUnknownEventType)
}

func decodeAs[T Event](eventType string, data []byte) (Event, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", eventType, err)
	}
	return v, nil
}
