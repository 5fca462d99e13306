package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"opledger/domain"
)

// SignalReplaySuspected is the kind of signal raised for spent authority
// presented on a message the operation had not seen.
const SignalReplaySuspected = "replay-suspected"

// SignalLogRegressed is the kind of signal raised for a LogRegressed: a
// cache or cursor found the store holding less than it had seen (the store
// lost acknowledged writes). Its worker_id names the process that noticed,
// its operation_id the operation whose stream went back (if one did).
const SignalLogRegressed = "log-regressed"

// ReasonLogRegressed is a log-regressed signal's reason.
const ReasonLogRegressed domain.Reason = "log.regressed"

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

// ErrMalformedSignal is wrapped by every DecodeSecuritySignal failure.
var ErrMalformedSignal = errors.New("malformed security signal")

// DecodeSecuritySignal parses a message value of TopicSecuritySignals by
// the same strict rules as DecodeRefundRequest (a *MalformedMessage naming
// the field, wrapping ErrMalformedSignal).
func DecodeSecuritySignal(value []byte) (SecuritySignal, error) {
	var s SecuritySignal
	if err := decodeStrict(ErrMalformedSignal, value, &s); err != nil {
		return SecuritySignal{}, err
	}
	// Signals are printed for people (opledger dlq): every text must be
	// printable, whoever wrote to the topic.
	for _, f := range []struct {
		name, text string
		max        int
	}{
		{"signal_id", s.SignalID, 2 * domain.MaxIDLength}, {"kind", s.Kind, domain.MaxIDLength},
		{"event_id", s.EventID, 2 * domain.MaxIDLength}, {"stream", s.Stream, 2 * domain.MaxIDLength},
		{"correlation_id", string(s.CorrelationID), domain.MaxIDLength}, {"operation_id", string(s.OperationID), domain.MaxIDLength},
		{"capability_id", string(s.CapabilityID), domain.MaxIDLength}, {"message_id", string(s.MessageID), domain.MaxIDLength},
		{"execution_id", string(s.ExecutionID), domain.MaxIDLength}, {"worker_id", s.WorkerID, domain.MaxIDLength},
		{"status", string(s.Status), domain.MaxIDLength}, {"reason", string(s.Reason), domain.MaxIDLength},
		{"detail", s.Detail, domain.MaxTextLength},
	} {
		if r := domain.CheckText(f.name, f.text, f.max, false); r != nil {
			return SecuritySignal{}, malformed(ErrMalformedSignal, f.name, "%s", r.Detail)
		}
	}
	return s, nil
}
