package codec

import (
	"fmt"
	"reflect"

	"opledger/domain"
	"opledger/eventstore"
)

// events is the registry: every event type this build reads and writes,
// one row each. It is the one table the codec is built from; adding a type
// or a version starts here (docs/design.md, "How to add an event type or a
// new version"), and the coverage test then names every consumer that has
// no case for it.
//
// OperationRequested, Decided, CapabilityIssued and Claimed are at version
// 2, which states the operation's kind and its use counts
// (history_kinds.go); they write each event at the oldest version that can
// say it, so a refund's are version 1, as before, and an export download's
// version 2. Every other type is at version 1. Version 1 of a type has
// grown by additive, optional fields whose absence is the safe reading (the
// policy, in docs/design.md); its older shapes are fixtures (codectest):
// OperationRequested without request_key and request_hash, Claimed without
// lease_secret_digest, WriteRefused without worker_id, secret_check, field,
// refusal_detail and escaped. A claim without a digest is bound to no
// holder and accepts no executor write.
var events = mustRegistry(
	Event[domain.OperationRequested]("opens an operation's stream: its kind, what it is about (the refund, the export), by whom, and the caller's request key",
		UpcastDown(requestedV1toV2, requestedV2toV1)).WritesOldest(1),
	Event[domain.Decided]("one policy evaluation for an attempt: verdict, facts, policy version, the uses it authorizes, provider key",
		UpcastDown(decidedV1toV2, decidedV2toV1)).WritesOldest(1),
	Event[domain.CapabilityIssued]("authority of N uses (a refund: one) for one attempt of the operation, until it expires",
		UpcastDown(issuedV1toV2, issuedV2toV1)).WritesOldest(1),
	Event[domain.CapabilityRevoked]("unused authority withdrawn"),
	Event[domain.Claimed]("one use of a capability consumed: an execution opens under a lease bound to its holder",
		UpcastDown(claimedV1toV2, claimedV2toV1)).WritesOldest(1),
	Event[domain.DeliveryDuplicated]("a message id seen again on the operation; changes nothing"),
	Event[domain.PresentationRejected]("a refused presentation of authority; execution not attempted"),
	Event[domain.LeaseRenewed]("an executing execution's lease extended, under its epoch"),
	Event[domain.OutcomeRecorded]("the executor's definite result, under its lease"),
	Event[domain.OutcomeUnknown]("the executor's own ambiguous result: the execution is Unknown"),
	Event[domain.LeaseLapsed]("an expired lease: the execution is Unknown and its epoch raised"),
	Event[domain.LateOutcomeRecorded]("a stale executor's evidence moving its own Unknown execution to a definite outcome"),
	Event[domain.Reconciled]("an Unknown or Escalated execution resolved: by lookup, resend or a person"),
	Event[domain.Escalated]("an Unknown execution handed to a person"),
	Event[domain.WriteRefused]("an executor's refused write, kept as evidence; changes nothing"),
	Event[domain.RefusalsSummarized]("refusals past the evidence bound in one window, counted (reasons, times, principals, samples); changes nothing, written to evidence streams only"),
	Event[domain.LostEffectEscalated]("an effect the executor made (or may have) that no execution accounts for, the store having lost it: opens an Escalated execution for a person; in the unattributed stream when the operation is gone"),
	Event[domain.LogRegressed]("a cache or cursor found the store holding less than it had seen (the log went back); in evidence-regressions"),
	Event[domain.LogRegressionAcknowledged]("an operator saw the log regressions recorded so far; in evidence-regressions"),
)

// Registry is a set of event kinds, each with its versions. The codec's
// functions use the build's registry (events); tests build others.
type Registry struct {
	kinds map[string]*Kind
	order []*Kind
}

// NewRegistry checks that every kind's versions chain from 1 to its Go type
// and that no type is declared twice, and returns the registry.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{kinds: make(map[string]*Kind, len(kinds))}
	goTypes := map[reflect.Type]string{}
	for i := range kinds {
		k := kinds[i]
		if err := k.validate(); err != nil {
			return nil, err
		}
		if _, dup := r.kinds[k.Type]; dup {
			return nil, fmt.Errorf("codec: event type %s registered twice", k.Type)
		}
		if other, dup := goTypes[k.GoType]; dup {
			return nil, fmt.Errorf("codec: %s is registered as %s and as %s", k.GoType, other, k.Type)
		}
		goTypes[k.GoType] = k.Type
		r.kinds[k.Type] = &k
		r.order = append(r.order, &k)
	}
	return r, nil
}

func mustRegistry(kinds ...Kind) *Registry {
	r, err := NewRegistry(kinds...)
	if err != nil {
		panic(err)
	}
	return r
}

// Kinds returns the registry's kinds in table order.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, len(r.order))
	for i, k := range r.order {
		out[i] = *k
	}
	return out
}

// Kind returns the kind of an event type.
func (r *Registry) Kind(eventType string) (Kind, bool) {
	k, ok := r.kinds[eventType]
	if !ok {
		return Kind{}, false
	}
	return *k, true
}

// Kinds returns every event type this build knows, in the registry's order.
func Kinds() []Kind { return events.Kinds() }

// Lookup returns the kind of an event type this build knows.
func Lookup(eventType string) (Kind, bool) { return events.Kind(eventType) }

// Decode reads a stored event: see Registry.Decode.
func Decode(eventType string, data, metadata []byte) (Decoded, error) {
	return events.Decode(eventType, data, metadata)
}

// DecodeEvent reads the data of a stored event: see Registry.DecodeEvent.
func DecodeEvent(eventType string, version int, data []byte) (domain.Event, error) {
	return events.DecodeEvent(eventType, version, data)
}

// DecodeRecorded reads an event as the store holds it: its metadata and
// its data, each parsed once, the data upcast to the current shape.
func DecodeRecorded(rec eventstore.RecordedEvent) (Decoded, error) {
	return events.Decode(rec.Type, rec.Data, rec.Metadata)
}

// Encode writes an event and its metadata: see Registry.Encode.
func Encode(e domain.Event, m domain.Metadata) (Encoded, error) { return events.Encode(e, m) }

// EncodeEvent returns e, with metadata m, as an event to append under id.
func EncodeEvent(id string, e domain.Event, m domain.Metadata) (eventstore.EventData, error) {
	enc, err := events.Encode(e, m)
	if err != nil {
		return eventstore.EventData{}, err
	}
	return eventstore.EventData{ID: id, Type: enc.Type, Data: enc.Data, Metadata: enc.Metadata}, nil
}
