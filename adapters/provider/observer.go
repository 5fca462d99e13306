package provider

import (
	"context"
	"time"

	"opledger/domain"
)

// Send describes one request the client sent (or tried to send).
type Send struct {
	Kind           SendKind
	OperationID    domain.OperationID
	IdempotencyKey domain.IdempotencyKey // empty for lookups by reference
	Attempt        int                   // 1-based
	Outcome        domain.Outcome        // for reads: Completed when answered, else Unknown or NotApplied
	NotFound       bool                  // a read answered, as documented, that the provider holds nothing asked for
	StatusCode     int                   // 0 when no response arrived
	Replayed       bool                  // the provider answered Idempotent-Replayed: true
	Retryable      bool                  // the client would resend after this result
	Detail         string
	Latency        time.Duration
}

// SendKind tells a refund creation from the reads.
type SendKind string

const (
	SendCreate   SendKind = "create"
	SendLookup   SendKind = "lookup"   // by our reference
	SendRetrieve SendKind = "retrieve" // by idempotency key
)

// Observer is told about every send, synchronously, from the goroutine that
// called the client, before any back-off. It must be safe for concurrent use
// when the client is, and should return quickly.
type Observer interface {
	ObserveSend(ctx context.Context, s Send)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, s Send)

// ObserveSend calls f.
func (f ObserverFunc) ObserveSend(ctx context.Context, s Send) { f(ctx, s) }
