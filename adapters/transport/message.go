package transport

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"opledger/domain"
	"opledger/domain/strictjson"
	"opledger/domain/worker"
)

// Topic names. The Postgres-only transport uses the same names for the
// topic column of its queue table.
const (
	// TopicRefundRequests carries one RefundRequest per issued capability,
	// keyed by operation id (ordering per operation).
	TopicRefundRequests = "opledger.refund-requests"
	// TopicDeadLetters holds refund requests that could not be handled
	// (undecodable, missing or malformed identifiers, unknown operation).
	TopicDeadLetters = "opledger.refund-requests.dlq"
	// TopicSecuritySignals carries one SecuritySignal per replay-suspected
	// refusal, for whoever owns the resubmission tooling.
	TopicSecuritySignals = "opledger.security-signals"
)

// Header names. Headers repeat identifiers for tooling and tracing; the
// value is authoritative.
const (
	HeaderMessageID     = "opledger-message-id"
	HeaderCorrelationID = "opledger-correlation-id"
	HeaderEventID       = "opledger-event-id" // the log event a relay published from
	// Dead-letter headers, added when a message is dead-lettered.
	HeaderDeadReason      = "opledger-dlq-reason"
	HeaderDeadDetail      = "opledger-dlq-detail"
	HeaderOriginalTopic   = "opledger-original-topic"
	HeaderOriginalPart    = "opledger-original-partition"
	HeaderOriginalOffset  = "opledger-original-offset"
	HeaderDeadLetteredBy  = "opledger-dlq-worker"
	HeaderDeadLetteredAt  = "opledger-dlq-at"
	HeaderResubmittedFrom = "opledger-resubmitted-from" // dead letter id a resubmission copies
	HeaderPreviousMessage = "opledger-previous-message-id"
)

// Reasons a message is dead-lettered that domain/ does not define (yet).
const (
	// ReasonDeliveryMalformed: the message cannot be decoded, lacks an
	// identifier, or carries one the ledger refuses as malformed.
	ReasonDeliveryMalformed = domain.ReasonDeliveryMalformed
	// ReasonDeliveryAttemptsExhausted: the Postgres queue handed the message
	// out MaxAttempts times without an acknowledgement (a worker crashing on
	// it, say).
	ReasonDeliveryAttemptsExhausted = domain.ReasonDeliveryAttemptsExhausted
)

// MaxMessageBytes bounds a message value this package decodes; anything
// larger is malformed (a refund request is a few hundred bytes).
const MaxMessageBytes = 16 << 10

// RefundRequest is the value of a message on TopicRefundRequests. It carries
// identifiers only: amount, currency and order come from the ledger.
type RefundRequest struct {
	MessageID     domain.MessageID     `json:"message_id"`
	CorrelationID domain.CorrelationID `json:"correlation_id,omitempty"`
	OperationID   domain.OperationID   `json:"operation_id"`
	CapabilityID  domain.CapabilityID  `json:"capability_id"`
	// CapabilityToken is a signed capability token, once the issuer signs
	// them. Optional; this package passes it through and does not verify it.
	CapabilityToken string `json:"capability_token,omitempty"`
}

// Encode returns the JSON value of r.
func (r RefundRequest) Encode() ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode refund request %s: %w", r.MessageID, err)
	}
	return b, nil
}

// Delivery is the worker's view of r.
func (r RefundRequest) Delivery() worker.Delivery {
	return worker.Delivery{MessageID: r.MessageID, CorrelationID: r.CorrelationID, OperationID: r.OperationID, CapabilityID: r.CapabilityID}
}

// ErrMalformed is wrapped by every DecodeRefundRequest failure.
var ErrMalformed = errors.New("malformed refund request")

// MalformedMessage is a DecodeRefundRequest (or DecodeSecuritySignal)
// refusal: the field at fault ("" when the value as a whole is) and what is
// wrong with it. Its text is printable, hostile input escaped, and at most
// maxReasonBytes long, so it can be dead-lettered and recorded as it is.
type MalformedMessage struct {
	Kind   error // ErrMalformed or ErrMalformedSignal
	Field  string
	Detail string
}

func (m *MalformedMessage) Error() string {
	if m.Field == "" {
		return fmt.Sprintf("%v: %s", m.Kind, m.Detail)
	}
	return fmt.Sprintf("%v: field %s: %s", m.Kind, m.Field, m.Detail)
}

func (m *MalformedMessage) Unwrap() error { return m.Kind }

// maxReasonBytes bounds a refusal's detail, well inside what the
// dispatcher copies into evidence and dead-letter metadata (maxDetail).
const maxReasonBytes = 400

func malformed(kind error, field, format string, args ...any) *MalformedMessage {
	detail, _ := domain.EvidenceText(fmt.Sprintf(format, args...), maxReasonBytes)
	field, _ = domain.EvidenceText(field, domain.MaxIDLength)
	return &MalformedMessage{Kind: kind, Field: field, Detail: detail}
}

// decodeStrict reads value, which must be exactly one JSON object, into dst
// by the rules of domain/strictjson: names match exactly, no duplicate
// names, valid UTF-8, no unknown fields at any depth.
func decodeStrict(kind error, value []byte, dst any) error {
	if len(value) > MaxMessageBytes {
		return malformed(kind, "", "%d bytes, at most %d", len(value), MaxMessageBytes)
	}
	err := strictjson.DecodeObject(value, dst, strictjson.Options{})
	var se *strictjson.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return malformed(kind, se.Field, "%s", se.Detail)
	}
	return malformed(kind, "", "%v", err)
}

// DecodeRefundRequest parses a message value. It refuses (a
// *MalformedMessage wrapping ErrMalformed, naming the field) a value that
// is larger than MaxMessageBytes, is not exactly one JSON object, repeats a
// name, matches a name only by case, has unknown fields, is not UTF-8, or
// whose identifiers are missing or malformed, or whose token holds
// anything but printable text. What it could read is returned alongside
// the error, as evidence, escaped (domain.EvidenceText), so that recording
// it can never fail on what the message held.
func DecodeRefundRequest(value []byte) (RefundRequest, error) {
	var r RefundRequest
	if err := decodeStrict(ErrMalformed, value, &r); err != nil {
		return r.escaped(), err
	}
	if err := r.validate(); err != nil {
		return r.escaped(), err
	}
	return r, nil
}

// validate checks each field, the first at fault named.
func (r RefundRequest) validate() error {
	if _, err := domain.ParseMessageID(string(r.MessageID)); err != nil {
		return malformed(ErrMalformed, "message_id", "%v", err)
	}
	if _, err := domain.ParseOperationID(string(r.OperationID)); err != nil {
		return malformed(ErrMalformed, "operation_id", "%v", err)
	}
	if _, err := domain.ParseCapabilityID(string(r.CapabilityID)); err != nil {
		return malformed(ErrMalformed, "capability_id", "%v", err)
	}
	if r.CorrelationID != "" {
		if _, err := domain.ParseCorrelationID(string(r.CorrelationID)); err != nil {
			return malformed(ErrMalformed, "correlation_id", "%v", err)
		}
	}
	if ref := domain.CheckText("capability_token", r.CapabilityToken, MaxMessageBytes, false); ref != nil {
		return malformed(ErrMalformed, "capability_token", "%s", ref.Detail)
	}
	return nil
}

// escaped is r with every field made safe to record (see EvidenceText).
func (r RefundRequest) escaped() RefundRequest {
	esc := func(s string) string {
		out, _ := domain.EvidenceText(s, domain.MaxIDLength)
		return out
	}
	return RefundRequest{
		MessageID: domain.MessageID(esc(string(r.MessageID))), CorrelationID: domain.CorrelationID(esc(string(r.CorrelationID))),
		OperationID: domain.OperationID(esc(string(r.OperationID))), CapabilityID: domain.CapabilityID(esc(string(r.CapabilityID))),
		CapabilityToken: esc(r.CapabilityToken),
	}
}

// WithMessageID rewrites a message value under a new message id, keeping
// every other field as it was: what resubmission does. A value that is not
// exactly one JSON object by the strict rules (decodeStrict, any names) is
// returned unchanged: it will be dead-lettered again, which is the truth
// about it.
func WithMessageID(value []byte, id domain.MessageID) []byte {
	var fields map[string]jsontext.Value
	if len(value) > MaxMessageBytes || strictjson.DecodeObject(value, &fields, strictjson.Options{}) != nil {
		return value
	}
	out := make(map[string]json.RawMessage, len(fields)+1)
	for k, v := range fields {
		out[k] = json.RawMessage(v)
	}
	raw, err := json.Marshal(id)
	if err != nil {
		return value
	}
	out["message_id"] = raw
	b, err := json.Marshal(out) // keys sorted: the same copy every time
	if err != nil {
		return value
	}
	return b
}
