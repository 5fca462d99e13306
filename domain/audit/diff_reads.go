package audit

import "opledger/domain"

// diffRead is how ProviderDiff reads an event type.
type diffRead int

const (
	// diffIgnores: the type bears neither on a refund's effect nor on an
	// execution's state.
	diffIgnores diffRead = iota + 1
	// diffReadsAlways: the type may record a completion.
	diffReadsAlways
	// diffReadsIfNamed: the type moves an execution of an operation, read
	// only for the operations the export names.
	diffReadsIfNamed
)

// diffReading says how ProviderDiff reads each event type; 0 for a type it
// has no case for (none this build knows; DiffReads).
func diffReading(eventType string) diffRead {
	switch eventType {
	case domain.TypeOperationRequested, domain.TypeOutcomeRecorded, domain.TypeLateOutcomeRecorded, domain.TypeReconciled:
		return diffReadsAlways // OperationRequested: to leave out operations that are not refunds
	case domain.TypeClaimed, domain.TypeOutcomeUnknown, domain.TypeLeaseLapsed, domain.TypeEscalated, domain.TypeLostEffectEscalated:
		return diffReadsIfNamed
	case domain.TypeDecided, domain.TypeCapabilityIssued, domain.TypeCapabilityRevoked, domain.TypeDeliveryDuplicated,
		domain.TypePresentationRejected, domain.TypeLeaseRenewed, domain.TypeWriteRefused, domain.TypeRefusalsSummarized,
		domain.TypeLogRegressed, domain.TypeLogRegressionAcknowledged:
		return diffIgnores
	}
	return 0
}
