// Package provider is the HTTP adapter to a Stripe-style refunds API: it
// implements domain.Provider.
//
// # Sending
//
// CreateRefund posts amount, currency (lowercased), order,
// metadata[operation_id] and metadata[idempotency_key] form-encoded, with
// header Idempotency-Key: req.IdempotencyKey. The key is the caller's, the
// same on every resend; the client never makes one up. The body is the same
// bytes on every resend. Go's transport is kept from resending on its own
// (the request has no GetBody), so every request that leaves is one of the
// client's sends, reported to the Observer. Redirects are not followed.
//
// # Classification of one send
//
//	observed                                               outcome     resent?
//	-----------------------------------------------------  ----------  -------
//	2xx, refund object matching the request, "succeeded"   Completed   no
//	2xx, refund object, "failed" or "canceled"             NotApplied  no
//	2xx, refund object, any other status ("pending", …)    Unknown     no
//	2xx, body unparsable or not matching the request       Unknown     no
//	400 invalid_request_error (documented validation)      NotApplied  no
//	400 idempotency_error (same key, other parameters)     Unknown     no
//	400 anything else, 401, 403, 404, 3xx, other 4xx       Unknown     no
//	409 (same key still in progress)                       Unknown     yes
//	429 (rate limited)                                     Unknown     yes
//	5xx                                                    Unknown     yes
//	body unreadable (connection failed while reading)      Unknown     yes
//	per-send timeout after a connection was obtained       Unknown     yes
//	connection reset / EOF / any error once connected      Unknown     yes
//	ctx cancelled mid-request                              Unknown     no
//	dial failed: no connection obtained (httptrace GotConn
//	  never fired) and the error is a *net.OpError "dial"  NotApplied  yes
//	invalid RefundRequest, request not built, or ctx done
//	  before the first send: nothing sent                  NotApplied  no
//
// Anything not in the table is Unknown: when in doubt, Unknown. NotApplied
// for a dial error needs both signals, so that a custom RoundTripper whose
// trace hooks never fire cannot turn a lost response into NotApplied.
//
// # Retries
//
// At most Config.MaxAttempts sends, only after a send the table marks as
// resent, with exponential back-off from BackoffMin doubling to BackoffMax,
// with jitter in [d/2, d]. ctx (the lease-loss context) is checked before
// each send, and the back-off wait ends when ctx does: after cancellation no
// new send starts. Every resend carries the same key and body.
//
// # Classification of the whole call
//
//   - The first Completed ends the call: Completed.
//   - Otherwise the last send decides, with one exception: a NotApplied
//     (validation rejection, failed refund, dial error) after an earlier send
//     that was Unknown becomes Unknown, unless the provider marked the
//     rejection Idempotent-Replayed (then it is the key's first execution's
//     saved result, and nothing under the key took effect). The earlier send
//     may have reached the provider, and a fresh rejection of a resend
//     proves nothing about it: "charge already refunded" is what a
//     successful first send would cause.
//   - If ctx ends before the first send: NotApplied (nothing was sent).
//   - A provider reference seen on any send is kept (the last one seen).
//
// # Lookups
//
// LookupRefunds asks GET /v1/refunds?operation_id=…, retried like a send
// (it has no side effect), and validates every refund in the answer: any
// failure, a paginated (has_more) answer, or a refund of another operation is
// an error, never an empty result. Stripe's "canceled" is reported as
// "failed" and "requires_action" as "pending" (domain.ProviderRefund knows
// three statuses); the idempotency key comes from metadata[idempotency_key],
// which CreateRefund writes (a Stripe refund object does not carry its key),
// so that reconciliation can tell one attempt's refund from another's.
package provider
