// Package tracing wraps opledger's ports in OpenTelemetry spans, at the
// edges: the provider a worker or the reconciler calls (Provider), the
// worker a transport hands its messages to (Worker), a background round
// (Round). The command handler's own spans are domain/ledger's (a child of
// whichever span its caller holds) and the HTTP API's are adapters/httpapi's.
//
// A trace of one refund reads create → decide (the API's spans and the
// ledger's under them), claim → provider call → outcome (the worker's span
// per message, or the API's per request), and reconcile (a reconciler
// round, its provider reads and the ledger's Reconciled or Escalated). Every
// span names the operation (opledger.operation_id) and, where it is known,
// its correlation id and execution; none carries a secret: not a bearer
// token, not a capability token, not a lease secret. The idempotency key is
// no secret (the provider is sent it) and is recorded.
//
// Given a no-op TracerProvider (the default when no OTLP endpoint is
// configured) every wrapper costs a call and records nothing.
package tracing
