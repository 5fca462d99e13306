package client

import (
	"errors"
	"fmt"
	"time"
)

// Error is an error answer of the API: its HTTP status and the body's
// stable code, message and field (docs/api.md, "Errors"). Compare with
// errors.Is against the sentinels below, which match by code:
//
//	if errors.Is(err, client.ErrLeaseLost) { … }
type Error struct {
	// StatusCode is the HTTP status (0 on a sentinel).
	StatusCode int
	// Code is the stable code: the API's (request.invalid, store.unavailable,
	// …) or, on a 409, the ledger's reason (lease.lost, lease.not-held, …).
	Code string
	// Message is for people; Field names the request field at fault, when
	// one is.
	Message, Field string
	// RetryAfter is the Retry-After header of a 429 or 503 (0 when absent).
	RetryAfter time.Duration
	// RequestID is the X-Request-Id serve answered, for its log.
	RequestID string
}

func (e *Error) Error() string {
	s := e.Code
	if e.StatusCode != 0 {
		s = fmt.Sprintf("%d %s", e.StatusCode, e.Code)
	}
	if e.Field != "" {
		s += " (field " + e.Field + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is an *Error of the same code, so that
// errors.Is(err, ErrLeaseLost) holds for every lease.lost answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Temporary reports whether the same request may be sent again later and
// succeed: 503 (store.unavailable, ledger.contention) and 429 rate.limited.
// Nothing was done by a 429; after a 503 nothing may be assumed, and the
// same request is safe to send again (the ledger's writes are idempotent
// by event id).
func (e *Error) Temporary() bool {
	return e.StatusCode == 503 || e.StatusCode == 429
}

// Refusal reports whether the ledger refused the command in the state it
// found (a 409): stop at once, start nothing more, never send it again.
func (e *Error) Refusal() bool { return e.StatusCode == 409 }

// documented holds every sentinel by its code (a test holds it to
// docs/api.md's table).
var documented = map[string]*Error{}

// code makes a sentinel.
func code(c string) *Error {
	e := &Error{Code: c}
	documented[c] = e
	return e
}

// The documented codes (docs/api.md, "Errors"; the 409s are the ledger's
// reasons, domain/reasons.go). A 409 of a reason not listed here is still an
// *Error with that Code and Refusal() true.
var (
	// 400: the request, not the ledger's state, is at fault; Field names where.
	ErrRequestMalformed      = code("request.malformed")
	ErrRequestDuplicateField = code("request.duplicate-field")
	ErrRequestUnknownField   = code("request.unknown-field")
	ErrRequestInvalid        = code("request.invalid")
	// 401, 403: the token.
	ErrUnauthenticated = code("auth.unauthenticated")
	ErrForbidden       = code("auth.forbidden")
	// 404.
	ErrOperationUnknown  = code("operation.unknown")
	ErrExecutionUnknown  = code("execution.unknown")
	ErrSetAsideUnknown   = code("set-aside.unknown")
	ErrTestClockDisabled = code("test-clock.disabled")
	ErrNotFound          = code("not-found")
	// 405.
	ErrMethodNotAllowed = code("method.not-allowed")
	// 409: the ledger's refusals an executor meets.
	ErrLeaseLost             = code("lease.lost")
	ErrLeaseNotHeld          = code("lease.not-held")
	ErrExecutionNotUnknown   = code("execution.not-unknown")
	ErrLateOutcomeNotApplied = code("late-outcome.not-applied")
	// 409: the ledger's refusals an agent or operator meets.
	ErrOperationExecuting       = code("operation.executing")
	ErrOperationOutcomeUnknown  = code("operation.outcome-unknown")
	ErrOperationCompleted       = code("operation.completed")
	ErrOperationExists          = code("operation.exists")
	ErrDecisionNotAllowed       = code("decision.not-allowed")
	ErrCapabilityInvalid        = code("capability.invalid")
	ErrCapabilityAlreadyRevoked = code("capability.already-revoked")
	ErrCapabilityConsumed       = code("capability.consumed-cannot-revoke")
	// 413, 422.
	ErrRequestTooLarge    = code("request.too-large")
	ErrIdempotencyReused  = code("idempotency.key-reused")
	ErrKindDisabled       = code("operation.kind-disabled")
	ErrRateLimited        = code("rate.limited")
	ErrStreamCorrupt      = code("stream.corrupt")
	ErrInternal           = code("internal")
	ErrStoreUnavailable   = code("store.unavailable")
	ErrLedgerContention   = code("ledger.contention")
	ErrNotReady           = code("not-ready")
	errUnexpectedResponse = errors.New("unexpected response")
)

// ErrLeaseExpired is the cause of a lease's context when renewals kept
// failing (serve unreachable, 503s) until the lease's last confirmed expiry:
// the lease can no longer be vouched for, so no further request may start.
var ErrLeaseExpired = errors.New("the lease expired before a renewal was confirmed")

// ErrNoAnswer wraps a request that got no HTTP answer (connection refused,
// reset, timed out): whether it reached serve is not known.
var ErrNoAnswer = errors.New("no answer from serve")
