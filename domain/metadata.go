package domain

import "time"

// Metadata travels beside every event. It says who and why, never what.
// Its JSON, and the event's, are the codec's (domain/codec).
type Metadata struct {
	// SchemaVersion is the version of the event's JSON encoding, stamped by
	// the codec when the event is written (per event type; see
	// docs/design.md, "Event compatibility"). Absent means 1.
	SchemaVersion int           `json:"schema_version"`
	CorrelationID CorrelationID `json:"correlation_id,omitempty"`
	// CausationID is what caused the event: a message id, a request's
	// idempotency key, a sweeper or reconciler run.
	CausationID string    `json:"causation_id,omitempty"`
	Actor       string    `json:"actor,omitempty"`
	RecordedAt  time.Time `json:"recorded_at"`
}
