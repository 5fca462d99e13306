// Package provider is the HTTP adapter to payment providers: one Client
// implements domain.Provider for every provider, speaking to each through
// the wire adapter its profile's API names (APIStripe, APIMeridian). The
// package also holds what is provider knowledge and must stay out of the
// model: the built-in profiles (StripeV1, StripeV2, Meridian), the profile
// file (ParseProfileFile), each provider's status vocabulary (mapped onto
// domain.EffectState in one function per provider) and its export format
// for `audit provider-diff` (ExportReader). docs/providers.md describes both
// providers side by side. ExportClient implements domain.ExportDeliverer,
// the executor of export downloads (APIExports, profile ExportsV1), with the
// same sends, retries and whole-call conclusion (export_delivery.go).
//
// # Sending
//
// Stripe: CreateRefund posts amount, currency (lowercased), order,
// metadata[<reference field>] (the profile's ReferenceField, or
// operation_id) and metadata[idempotency_key] form-encoded to /v1/refunds,
// with header Idempotency-Key. Meridian: it posts
// {"merchantReference","merchantOrder","amount":{"value","currency"}} as
// JSON to /v3/refund-requests, with header Meridian-Request-Id. Either way
// the key is the caller's, the same on every resend; the client never makes
// one up. The body is the same bytes on every resend. Go's transport is kept from resending on its own
// (the request has no GetBody), so every request that leaves is one of the
// client's sends, reported to the Observer. Redirects are not followed.
//
// # Classification of one send: Stripe
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
// # Classification of one send: Meridian
//
//	observed                                               outcome     resent?
//	-----------------------------------------------------  ----------  -------
//	2xx, refund request matching the request (request id,
//	  reference, amount, currency), COMPLETED              Completed   no
//	2xx, refund request, DECLINED                          NotApplied  no
//	2xx, PROCESSING or any other status                    Unknown     no
//	2xx, body unparsable or not matching the request       Unknown     no
//	400 MALFORMED_REQUEST (not read, nothing executed)     NotApplied  no
//	422 VALIDATION_FAILED (refused before execution)       NotApplied  no
//	422 REQUEST_ID_REUSED (same id, other parameters)      Unknown     no
//	400/422 with another code or body, other 4xx, 3xx      Unknown     no
//	409 (same id still in progress)                        Unknown     yes
//	429, 5xx                                               Unknown     yes
//	transport failures                                     as for Stripe, below
//
// Transport failures are classified the same for every provider:
//
//	body unreadable (connection failed while reading)      Unknown     yes
//	per-send timeout after a connection was obtained       Unknown     yes
//	connection reset / EOF / any error once connected      Unknown     yes
//	ctx cancelled mid-request                              Unknown     no
//	dial failed (as above)                                 NotApplied  yes
//
// Anything not in the tables is Unknown: when in doubt, Unknown. NotApplied
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
// # Reads
//
// A read the profile does not offer returns domain.ErrReadUnsupported and
// sends nothing. Reads have no side effect, so they are retried like a send
// (bounded by MaxAttempts, ctx honoured); any failure is an error, never an
// empty answer.
//
// LookupByReference (Stripe) asks GET /v1/refunds?<reference field>=… and
// validates every refund in the answer: a paginated (has_more) answer or a
// refund of another operation is an error. Statuses map by stripeState:
// succeeded → applied, failed and canceled → not applied, pending and
// requires_action → in progress, anything else → unknown. The idempotency
// key comes from metadata[idempotency_key], which CreateRefund writes (a
// Stripe refund object does not carry its key), so that reconciliation can
// tell one attempt's refund from another's.
//
// RetrieveByKey (Meridian) asks GET
// /v3/refund-requests/by-request-id/{key}: 200 is the refund request
// (checked to carry the key asked for), 404 with errorCode NOT_FOUND is
// found = false; any other answer, a 404 without that code included, is an
// error. Statuses map by meridianState: COMPLETED → applied, DECLINED → not
// applied, PROCESSING → in progress, anything else → unknown.
package provider
