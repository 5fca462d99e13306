package provider

import (
	"context"
	"errors"
	"fmt"
	"net"

	"opledger/domain"
	"opledger/domain/simbug"
)

// sendResult is one send, classified (see the tables in the package doc).
type sendResult struct {
	outcome   domain.Outcome
	reference string // the provider's refund id, when the answer named one
	status    int    // 0 when no response arrived
	replayed  bool   // the provider marked the answer a replay of the key's saved result
	retryable bool   // resending the same key is sensible after this
	detail    string
}

// classifyTransportError classifies a send that got no response, the same
// for every provider. ctx is the caller's context (not the per-send one).
func classifyTransportError(ctx context.Context, err error, trace *sendTrace) sendResult {
	var opErr *net.OpError
	if simbug.On(simbug.TimeoutAsNotApplied) && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return sendResult{outcome: domain.NotApplied, detail: "timed out, read as nothing sent: " + err.Error()}
	}
	switch {
	case !trace.gotConn.Load() && errors.As(err, &opErr) && opErr.Op == "dial":
		return sendResult{outcome: domain.NotApplied, retryable: ctx.Err() == nil,
			detail: "connection not established, nothing sent: " + err.Error()}
	case ctx.Err() != nil:
		return sendResult{outcome: domain.Unknown,
			detail: fmt.Sprintf("cancelled mid-request (%s): %v", trace.progress(), err)}
	case errors.Is(err, context.DeadlineExceeded):
		return sendResult{outcome: domain.Unknown, retryable: true,
			detail: fmt.Sprintf("timed out (%s): %v", trace.progress(), err)}
	default:
		return sendResult{outcome: domain.Unknown, retryable: true,
			detail: fmt.Sprintf("connection failed (%s): %v", trace.progress(), err)}
	}
}

// maxDetailMessage bounds how much of a provider's message a detail quotes.
const maxDetailMessage = 200

// quote bounds a provider's message for a detail; the detail is escaped
// where it is recorded (domain.EvidenceText).
func quote(msg string) string {
	if len(msg) > maxDetailMessage {
		msg = msg[:maxDetailMessage] + "…"
	}
	return fmt.Sprintf("%q", msg)
}
