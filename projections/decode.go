package projections

import (
	"fmt"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// decodedEvent is a recorded event with its domain form. actor is the
// metadata's actor, decoded only for the event types that show it. err is
// why the event could not be decoded; it stops the batch only if the batch
// folds the event (a rebuild may stop short of it).
type decodedEvent struct {
	rec   *eventstore.RecordedEvent
	seq   int64        // 1-based ordinal in the log as the projection reads it; set by the batch
	event domain.Event // nil: a stream the read models ignore
	op    string       // the operation of an operation stream or its evidence stream; "" for an unattributed one
	// evidence: the event is of an evidence stream (an operation's, or an
	// unattributed one).
	evidence bool
	actor    string
	err      error
}

func corrupt(d decodedEvent, format string, args ...any) error {
	return fmt.Errorf("%w: %s@%d (%s, position %s): %s", ErrCorruptLog, d.rec.StreamID, d.rec.Version,
		d.rec.Type, d.rec.Position, fmt.Sprintf(format, args...))
}

// decodeEvents decodes the events of operation streams and of evidence
// streams (operations' and unattributed) with codec.DecodeRecorded
// (metadata and payload parsed once each); events of other streams stay
// undecoded and fold to nothing. It is pure, so the next batch can be
// decoded while one is written.
func decodeEvents(events []eventstore.RecordedEvent) []decodedEvent {
	decoded := make([]decodedEvent, len(events))
	for i := range events {
		rec := &events[i]
		d := decodedEvent{rec: rec}
		op, evidence, isOp := domain.OperationOfStream(rec.StreamID)
		unattributed := !isOp && domain.IsUnattributedStream(rec.StreamID)
		if !isOp && !unattributed {
			decoded[i] = d
			continue
		}
		d.op, d.evidence = string(op), evidence || unattributed
		dec, err := codec.DecodeRecorded(*rec)
		if err != nil {
			d.err = corrupt(d, "%v", err)
		}
		d.event = dec.Event
		if err == nil && showsActor(rec.Type) {
			d.actor = dec.Meta.Actor
		}
		decoded[i] = d
	}
	return decoded
}

// showsActor reports whether the read models show the metadata's actor for
// an event type.
func showsActor(eventType string) bool {
	switch eventType {
	case domain.TypeCapabilityRevoked, domain.TypeLateOutcomeRecorded, domain.TypeReconciled,
		domain.TypeEscalated, domain.TypeWriteRefused, domain.TypePresentationRejected, domain.TypeDeliveryDuplicated,
		domain.TypeRefusalsSummarized:
		return true
	}
	return false
}
