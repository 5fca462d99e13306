package transport

import (
	"strings"

	"github.com/google/uuid"

	"opledger/domain"
)

// Namespaces of the name-based (version 5) UUIDs below. Never change them:
// a changed namespace gives a re-published event a new message id, and the
// inbox could no longer recognise it.
var (
	nsRefundRequest = uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:opledger:transport:refund-request"))
	nsSignal        = uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:opledger:transport:security-signal"))
	nsResubmission  = uuid.NewSHA1(uuid.NameSpaceURL, []byte("urn:opledger:transport:resubmission"))
)

// MessageIDForEvent is the message id of the refund request published for
// the CapabilityIssued event eventID: "MSG-" and a version 5 UUID of the
// event id. Stable: every publication of one event carries the same id.
func MessageIDForEvent(eventID string) domain.MessageID {
	return domain.MessageID("MSG-" + strings.ToUpper(uuid.NewSHA1(nsRefundRequest, []byte(eventID)).String()))
}

// SignalIDForEvent is the id of the security signal published for the
// PresentationRejected event eventID ("SIG-" and a version 5 UUID).
func SignalIDForEvent(eventID string) string {
	return "SIG-" + strings.ToUpper(uuid.NewSHA1(nsSignal, []byte(eventID)).String())
}

// ResubmissionMessageID is the new message id under which dead letter
// deadLetterID is resubmitted ("MSG-R-" and a version 5 UUID of the dead
// letter's id). It differs from every message id the relay mints, so the
// ledger sees a new message, as it would from any resubmission tool; it is
// stable per dead letter, so a resubmission retried after a crash is a
// duplicate delivery, not a second presentation.
func ResubmissionMessageID(deadLetterID string) domain.MessageID {
	return domain.MessageID("MSG-R-" + strings.ToUpper(uuid.NewSHA1(nsResubmission, []byte(deadLetterID)).String()))
}
