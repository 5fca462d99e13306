package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"opledger/domain"
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

// DecodeRefundRequest parses a message value. It refuses (ErrMalformed) a
// value that is not one JSON object, has unknown fields, is larger than
// MaxMessageBytes, or whose identifiers are missing or malformed. What it
// could read is returned alongside the error, as evidence.
func DecodeRefundRequest(value []byte) (RefundRequest, error) {
	var r RefundRequest
	if len(value) > MaxMessageBytes {
		return r, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(value), MaxMessageBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return r, fmt.Errorf("%w: trailing data after the JSON object", ErrMalformed)
	}
	var errs []error
	if _, err := domain.ParseMessageID(string(r.MessageID)); err != nil {
		errs = append(errs, err)
	}
	if _, err := domain.ParseOperationID(string(r.OperationID)); err != nil {
		errs = append(errs, err)
	}
	if _, err := domain.ParseCapabilityID(string(r.CapabilityID)); err != nil {
		errs = append(errs, err)
	}
	if r.CorrelationID != "" {
		if _, err := domain.ParseCorrelationID(string(r.CorrelationID)); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return r, fmt.Errorf("%w: %w", ErrMalformed, errors.Join(errs...))
	}
	return r, nil
}

// WithMessageID rewrites a message value under a new message id, keeping
// every other field as it was: what resubmission does. A value that is not
// a JSON object is returned unchanged (it will be dead-lettered again, which
// is the truth about it).
func WithMessageID(value []byte, id domain.MessageID) []byte {
	var fields map[string]json.RawMessage
	if len(value) > MaxMessageBytes || json.Unmarshal(value, &fields) != nil || fields == nil {
		return value
	}
	raw, err := json.Marshal(id)
	if err != nil {
		return value
	}
	fields["message_id"] = raw
	out, err := json.Marshal(fields)
	if err != nil {
		return value
	}
	return out
}
