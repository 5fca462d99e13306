package transport

import (
	"encoding/json"
	"fmt"
	"time"

	"opledger/domain"
)

// SignalReplaySuspected is the kind of signal raised for spent authority
// presented on a message the operation had not seen.
const SignalReplaySuspected = "replay-suspected"

// SecuritySignal is the value of a message on TopicSecuritySignals: a
// refusal a person should look at. The ledger already refused the
// presentation and recorded it; the signal routes it to whoever owns the
// resubmission tooling. It carries identifiers and the recorded reason,
// nothing that authorizes anything.
type SecuritySignal struct {
	SignalID           string               `json:"signal_id"` // SignalIDForEvent(event_id): stable
	Kind               string               `json:"kind"`
	EventID            string               `json:"event_id"` // the PresentationRejected event in the log
	Stream             string               `json:"stream"`
	CorrelationID      domain.CorrelationID `json:"correlation_id,omitempty"`
	OperationID        domain.OperationID   `json:"operation_id"`
	CapabilityID       domain.CapabilityID  `json:"capability_id,omitempty"`
	MessageID          domain.MessageID     `json:"message_id"` // the presenting message
	ExecutionID        domain.ExecutionID   `json:"execution_id,omitempty"`
	WorkerID           string               `json:"worker_id,omitempty"`
	Status             domain.ClaimStatus   `json:"status"`
	Reason             domain.Reason        `json:"reason"`
	Detail             string               `json:"detail,omitempty"`
	ExecutionAttempted bool                 `json:"execution_attempted"`
	RejectedAt         time.Time            `json:"rejected_at"`
}

// Encode returns the JSON value of s.
func (s SecuritySignal) Encode() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode security signal %s: %w", s.SignalID, err)
	}
	return b, nil
}

// DecodeSecuritySignal parses a message value of TopicSecuritySignals.
func DecodeSecuritySignal(value []byte) (SecuritySignal, error) {
	var s SecuritySignal
	if err := json.Unmarshal(value, &s); err != nil {
		return s, fmt.Errorf("decode security signal: %w", err)
	}
	return s, nil
}
