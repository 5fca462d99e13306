package client

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// The kinds of operation, each with its executor.
const (
	// KindRefund: a refund at the payment provider, under key
	// refund-<operation>-a<attempt> (stripe-v2 reuses attempt 1's).
	KindRefund = "refund"
	// KindExportDownload: one delivery of a generated export by the
	// export-delivery service, under key export-<operation>-a<attempt>-u<use>.
	KindExportDownload = "export-download"
)

// Execution is a claimed execution: what to execute, under which key, and
// the lease that lets this worker, alone, write for it. Its lease secret is
// kept unexported and is never printed, logged or encoded.
type Execution struct {
	ExecutionID string
	OperationID string
	// Kind says which executor: KindRefund or KindExportDownload.
	Kind string
	// LeaseEpoch is the epoch every write for the execution is made under.
	LeaseEpoch int64
	// IdempotencyKey is the executor's key: send it on every resend of the
	// execution's one request, and never another.
	IdempotencyKey string
	// Use is which use of the capability the claim consumed (1..N), UsesLeft
	// how many the capability has left.
	Use, UsesLeft int
	// A refund's amount (minor units), currency (ISO 4217 capitals) and order.
	AmountMinor int64
	Currency    string
	OrderID     string
	// An export download's export.
	ExportID string

	// secret returns the lease secret: a closure, so that no printing or
	// encoding of an Execution (fmt reads fields by reflection, even
	// unexported ones) can reach it.
	secret func() string

	mu sync.Mutex
	// serverExpiry is the lease's expiry by serve's clock, as last confirmed.
	serverExpiry time.Time
	// deadline is the same expiry by this process's clock: the time the
	// confirming request was sent plus the lease's length, so that no clock
	// difference with serve lengthens it.
	deadline time.Time
}

// LeaseExpiresAt is the lease's expiry by serve's clock, as last confirmed
// (by the claim or a renewal).
func (x *Execution) LeaseExpiresAt() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.serverExpiry
}

// Deadline is the lease's expiry by this process's clock: a request of the
// execution must not start after it, since once the lease lapsed the
// reconciler may resend the request under the same key.
func (x *Execution) Deadline() time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.deadline
}

func (x *Execution) setExpiry(server, deadline time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.serverExpiry, x.deadline = server, deadline
}

// ProviderMetadata is the metadata a refund must carry at the provider, for
// the reconciler to read it back: our operation id (by which it finds the
// refund) and the key (by which it tells one attempt's refund from
// another's). On a Stripe-style API send each as metadata[KEY]=VALUE; a
// profile file's lookup_by_reference.metadata_key may name another key for
// the operation id (StripeRefunds.ReferenceKey).
func (x *Execution) ProviderMetadata() map[string]string {
	return map[string]string{"operation_id": x.OperationID, "idempotency_key": x.IdempotencyKey}
}

// errNotClaimed: an Execution not made by Claim holds no lease to write under.
var errNotClaimed = errors.New("not an execution this client claimed: it holds no lease secret")

// leaseSecret is the secret to present, or errNotClaimed.
func (x *Execution) leaseSecret() (string, error) {
	if x.secret == nil {
		return "", fmt.Errorf("execution %s: %w", x.ExecutionID, errNotClaimed)
	}
	return x.secret(), nil
}

// LogValue names the execution in logs, without its secret.
func (x *Execution) LogValue() slog.Value {
	return slog.GroupValue(slog.String("execution_id", x.ExecutionID), slog.String("operation_id", x.OperationID),
		slog.Int64("lease_epoch", x.LeaseEpoch), slog.String("idempotency_key", x.IdempotencyKey))
}
