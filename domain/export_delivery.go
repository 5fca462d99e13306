package domain

import "context"

// ExportDelivery is what a worker asks the export-delivery service to do
// for one use of an export download: deliver the export once, under the
// use's own key. The export comes from the ledger, never from the message
// that presented the capability.
type ExportDelivery struct {
	OperationID OperationID
	ExportID    string
	// Use is which use of the capability the delivery is (1..N).
	Use            int
	IdempotencyKey IdempotencyKey
}

// ExportDeliverer is the port to the service that delivers generated
// exports: the executor of KindExportDownload, beside Provider, the
// executor of refunds. Its contract is Provider's:
//
//   - DeliverExport never returns a bare error: every failure is classified
//     into an Outcome, when in doubt Unknown. It resends only with the same
//     key, and starts no new send once ctx is done (the lease-loss context).
//   - The reads have no side effect; an error means the service could not
//     tell (never "not found"), and a read it does not offer returns
//     ErrReadUnsupported without asking anything. LookupByReference returns
//     the deliveries the service holds for the operation (every use's);
//     RetrieveByKey the delivery made under one use's key, found = false
//     when the service affirmatively holds none.
//
// What the service documents about its keys and reads is a ProviderProfile
// like any provider's, and reconciliation decides from it the same way.
type ExportDeliverer interface {
	DeliverExport(ctx context.Context, req ExportDelivery) EffectResult
	LookupByReference(ctx context.Context, op OperationID) ([]ProviderEffect, error)
	RetrieveByKey(ctx context.Context, key IdempotencyKey) (effect ProviderEffect, found bool, err error)
}
