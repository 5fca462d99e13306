package feed

import (
	"fmt"
	"time"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// Entry is one change of an operation's state: the value of a feed item
// over HTTP and of a message on the feed's Kafka topic. Fields a state
// does not have are omitted.
type Entry struct {
	// EventID is the id of the log event the entry reports: stable, the same
	// on every delivery. Deduplicate by it.
	EventID string `json:"event_id"`
	// Position is the event's place in the global log (opaque text of the
	// store's position): read on after it to resume.
	Position string `json:"position"`
	// OperationID and StreamVersion say which operation changed and where
	// in its stream: within one operation, a higher version is a later
	// change (a consumer keeping the latest state ignores a lower one).
	OperationID   domain.OperationID `json:"operation_id"`
	StreamVersion int64              `json:"stream_version"`
	// EventType is the log event's type (Reconciled, LeaseLapsed, ...).
	EventType string `json:"event_type"`
	// State is where the operation moved.
	State State `json:"state"`
	// Outcome is the definite outcome a completed, not_applied or
	// reconciled entry records: Completed means the effect happened.
	Outcome domain.Outcome `json:"outcome,omitempty"`

	// The operation's kind, amount and references, as it was requested.
	Kind          domain.OperationKind `json:"kind"`
	OrderID       string               `json:"order_id,omitempty"`
	AmountMinor   int64                `json:"amount_minor,omitempty"`
	Currency      string               `json:"currency,omitempty"`
	ExportID      string               `json:"export_id,omitempty"`
	CorrelationID domain.CorrelationID `json:"correlation_id,omitempty"`

	// The change's own references, where it has them.
	DecisionID        domain.DecisionID      `json:"decision_id,omitempty"`
	CapabilityID      domain.CapabilityID    `json:"capability_id,omitempty"`
	ExecutionID       domain.ExecutionID     `json:"execution_id,omitempty"`
	Attempt           int                    `json:"attempt,omitempty"`
	Use               int                    `json:"use,omitempty"`
	IdempotencyKey    domain.IdempotencyKey  `json:"idempotency_key,omitempty"`
	ProviderReference string                 `json:"provider_reference,omitempty"`
	Method            domain.ReconcileMethod `json:"method,omitempty"`
	// Reason says why, for denied, revoked, unknown and escalated entries
	// (the recorded cause, as the ledger holds it).
	Reason string `json:"reason,omitempty"`
	// At is when the change happened by the ledger's clock; RecordedAt when
	// the store wrote the event.
	At         time.Time `json:"at"`
	RecordedAt time.Time `json:"recorded_at"`
}

// Head is what an operation's first event, OperationRequested, says of it
// for every later entry: never changed by a later event.
type Head struct {
	Kind          domain.OperationKind
	OrderID       string
	AmountMinor   int64
	Currency      string
	ExportID      string
	CorrelationID domain.CorrelationID
}

// HeadOf is the head an OperationRequested states.
func HeadOf(e domain.OperationRequested) Head {
	return Head{Kind: e.Kind, OrderID: e.OrderID, AmountMinor: e.AmountMinor, Currency: e.Currency,
		ExportID: e.ExportID, CorrelationID: e.CorrelationID}
}

// NewEntry is the entry of one decoded log event of operation op, whose
// head is h; ok is false for an event that changes no state.
func NewEntry(rec eventstore.RecordedEvent, d codec.Decoded, op domain.OperationID, h Head) (Entry, bool, error) {
	e, m := change(d.Event)
	switch m {
	case unhandled:
		return Entry{}, false, fmt.Errorf("feed: no case for event type %s (%T)", rec.Type, d.Event)
	case ignored:
		return Entry{}, false, nil
	}
	e.EventID, e.OperationID, e.StreamVersion, e.EventType = rec.ID, op, rec.Version, rec.Type
	if rec.Position != nil {
		e.Position = rec.Position.String()
	}
	e.Kind, e.OrderID, e.AmountMinor, e.Currency, e.ExportID = h.Kind, h.OrderID, h.AmountMinor, h.Currency, h.ExportID
	e.CorrelationID = h.CorrelationID
	e.At, e.RecordedAt = e.At.UTC(), rec.RecordedAt.UTC()
	return e, true, nil
}
