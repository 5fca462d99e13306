// Package client is opledger's Go client for workers that speak serve's HTTP
// API (docs/api.md, "A worker in any language") instead of running
// `opledger worker` in process. It imports nothing but the standard
// library: the wire is its only contract with serve.
//
// The steps the protocol asks of a worker, each written once here:
//
//   - Claim presents a message's capability and answers every documented
//     status typed (Claimed, DuplicateDelivery, AlreadyConsumed, Expired,
//     Revoked, Invalid, OperationNotExecutable); only Claimed carries an
//     Execution: what to execute, the key, and the lease. It is never sent
//     twice. An error means nothing may execute and the message must not be
//     acknowledged.
//   - KeepLease renews the lease with its secret every third of its length
//     and cancels the call's context (Lease.Context) the moment a renewal is
//     refused (409 lease.lost or lease.not-held) or renewals failed until the
//     lease's deadline; context.Cause says which.
//   - An Executor makes the one request under the claim's key, with the
//     metadata the reconciler reads back (StripeRefunds, ExportDeliveries,
//     or your own with Execution.IdempotencyKey and ProviderMetadata).
//   - RecordOutcome and RecordLateOutcome send the same body again on 503,
//     429 or no answer (bounded by the lease, and by LeaseDuration /
//     RetryBackoff + 1 sends) and never after a 409; Record chooses between
//     them as the protocol says.
//   - Worker.Handle does all of it for one message; Worker.Run for a queue.
//
// Every error answer is an *Error with the API's stable code; compare with
// errors.Is against the sentinels (ErrLeaseLost, ErrStoreUnavailable, …).
//
// Guarantees are boundaries, not "exactly once": a request whose answer is
// lost, or whose lease is lost mid-flight, is Unknown, and the reconciler
// asks the provider before anything is attempted again. The lease secret is
// held in memory only and never printed, logged or encoded.
package client
