package client

import (
	"context"
	"fmt"
)

// Executor makes a claimed execution's one request: a refund at the payment
// provider, a delivery at the export-delivery service. Its contract:
//
//   - Execute never fails bare: whatever happened is classified into a
//     Result; when in doubt, Unknown (the reconciler asks the provider).
//   - It sends x.IdempotencyKey, and what x says to execute (amount,
//     currency, order; export and use), never anything from the message.
//     A resend carries the same key and the same body.
//   - ctx is the lease's (Lease.Context, bounded by the call timeout): once
//     it ends no further send starts, and a send in flight is abandoned
//     (Unknown: it may have arrived).
//   - Besides the key, a refund carries x.ProviderMetadata(), which the
//     reconciler reads back.
type Executor interface {
	Execute(ctx context.Context, x *Execution) Result
}

// ExecutorFunc is a function as an Executor.
type ExecutorFunc func(ctx context.Context, x *Execution) Result

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, x *Execution) Result { return f(ctx, x) }

// ByKind executes each kind of operation with its own executor. A kind
// without one is answered NotApplied without sending anything (the claimed
// use is spent; the capability's holder presents it again for the next).
type ByKind map[string]Executor

// Execute dispatches x to the executor of its kind.
func (k ByKind) Execute(ctx context.Context, x *Execution) Result {
	e, ok := k[x.Kind]
	if !ok || e == nil {
		return Result{Outcome: NotApplied, Detail: fmt.Sprintf("not sent: this worker has no executor for kind %q", x.Kind)}
	}
	return e.Execute(ctx, x)
}
