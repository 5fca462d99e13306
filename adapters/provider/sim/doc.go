// Package sim is a payment-provider simulator of two different providers,
// chosen by Config.Profile: a Stripe-style refunds API (stripe-v1,
// stripe-v2) and the Meridian refund-requests API (meridian), each served
// as an http.Handler with an observable ledger, armed faults and a
// simulated clock. Beside either it serves the export-delivery service,
// the executor of export downloads (exports.go: /v1/export_deliveries,
// with a ledger of deliveries per operation and per key). Tests use it in-process through httptest; the
// `opledger provider-sim --provider NAME` command serves it on a listener
// (Serve, ListenAndServe). The idempotency, fault and ledger engine is one;
// each provider's dialect reads its requests and writes its answers and
// export.
//
// # Stripe API (stripe-v1, stripe-v2)
//
//	POST /v1/refunds              create a refund; header Idempotency-Key required
//	GET  /v1/refunds?operation_id= refunds whose metadata operation_id matches (a lookup;
//	                              the parameter is Config.ReferenceKey)
//	GET  /v1/refunds/{id}         one refund (a lookup)
//	GET  /_sim/ledger             the Ledger as JSON
//	GET  /_sim/ledger/export      every refund created, one JSON object per line (ExportedRefund)
//	GET  /_sim/faults             armed faults; POST arms one: {"kind","operation_id","duration"}
//	POST /_sim/faults/release     releases every held response
//	GET  /_sim/clock              the simulated time; POST {"advance":"25h"} moves it forward
//
// A creation request carries amount (minor units, integer > 0), currency
// (three letters), order, and metadata (metadata[operation_id] and any other
// metadata[k] in a form body; "metadata":{...} in a JSON body). Unknown
// parameters are refused, as Stripe does. Input is read strictly, and every
// refusal is a 400 invalid_request_error whose param names the parameter: a
// form parameter given twice; a JSON body that is not exactly one object
// (null, an array, two objects, trailing data), repeats a name (metadata
// keys included), matches a name only by case, or is not UTF-8
// (domain/strictjson); order, metadata keys and values, and the
// Idempotency-Key holding invalid UTF-8, NUL, control or format characters
// (domain.CheckText: so its ledger and export never carry them). A lookup
// takes operation_id once and nothing else; /_sim bodies are read by the
// same strict rules.
//
// # Meridian API (meridian)
//
//	POST /v3/refund-requests                        create; header Meridian-Request-Id required
//	GET  /v3/refund-requests/by-request-id/{key}    the refund request made under a request id (a lookup)
//	GET  /v3/refund-requests/{id}                   one refund request (a lookup)
//
// There is no search by the merchant's reference: a caller that lost an
// answer can only ask by the request id it sent. A creation body is JSON
// only, read strictly (domain/strictjson):
// {"merchantReference":"OP-1","merchantOrder":"ORD-1","amount":{"value":12000,"currency":"EUR"}}.
// The first execution answers 201 with the refund request
// ({"refundRequestId","requestId","merchantReference","merchantOrder",
// "amount":{"value","currency"},"status":"COMPLETED"|"DECLINED",
// "declineReason","createdAt"}); a replay answers 200 with the same object
// and Meridian-Replayed: true. Errors are {"errorCode","message","field"}:
// 400 MALFORMED_REQUEST (the request could not be read: no request id, not
// JSON, unknown or repeated names, another media type), 422
// VALIDATION_FAILED (a value refused before execution), 422
// REQUEST_ID_REUSED (same id, other parameters), 409 REQUEST_IN_PROGRESS,
// 413, 429 RATE_LIMITED, 500 INTERNAL_ERROR, 503 SERVICE_UNAVAILABLE. The
// retrieve by request id answers 200 with the refund request committed
// under it, 404 NOT_FOUND when none is, 409 REQUEST_IN_PROGRESS while a
// request under it executes with nothing committed. The export is a CSV
// settlement report (MeridianExportHeader, then one line per refund
// request).
//
// # Idempotency: what is saved under a key
//
// The simulator follows Stripe's v1 documentation: "results are only saved
// after the execution of an endpoint begins. If incoming parameters fail
// validation, or the request conflicts with another one executing
// concurrently, no idempotent result is saved". Precisely:
//
//   - Not saved, key left untouched (the request never began executing): a
//     missing or over-long Idempotency-Key, an unreadable or oversized body,
//     parameter validation errors (missing/invalid amount, currency, order,
//     metadata, unknown parameters), 409 (same key in progress), 400
//     idempotency_error (same key, different parameters), 429 (key store
//     full), and the arrival faults (drop-connection-before-read, and delay
//     when the client gives up during it).
//   - Saved (execution began): the 200 refund, and the execution faults:
//     reject-validation (a documented 400 invalid_request_error raised by the
//     endpoint before it changes anything), 5xx-before-commit,
//     5xx-after-commit, lose-response-after-commit (the 200 is saved; only the
//     connection is lost) and hold-response (saved when the hold ends).
//
// Replays differ by profile:
//
//   - stripe-v1: a key is remembered 24 h of simulated time from its first
//     request, then pruned and treated as new. A repeated key with identical
//     parameters gets the saved response replayed, status and body
//     byte-identical, errors included (a saved 500 is replayed even when the
//     refund was committed), with header Idempotent-Replayed: true.
//   - stripe-v2 (and meridian, whose request ids are remembered 7 days): a
//     key is remembered 30 days. If a refund was committed under
//     the key, a repeat returns the refund's current object with 200 and
//     Idempotent-Replayed: true (no new changes), even when the first answer
//     was a 5xx-after-commit: the work did not fail, only its answer. If the
//     saved result is a failure with nothing committed (5xx-before-commit,
//     reject-validation) the request is executed again under the same key, and
//     its new result replaces the saved one; the key keeps its first-seen
//     time.
//
// In both profiles a key whose request is still executing (for example a
// held response) answers 409 idempotency_error, code idempotency_key_in_use;
// a key reused with different parameters answers 400 idempotency_error, code
// idempotency_key_reused. Parameters are compared after parsing, so a form
// and a JSON body with the same values are the same request.
//
// # Faults
//
// A fault is armed for the next matching refund-creation request (optionally
// only one whose metadata operation_id matches) and is consumed by it; faults
// are matched in the order they were armed. Lookups are never faulted.
//
//   - Arrival faults match a request as soon as its body has been received,
//     before its key is examined: drop-connection-before-read (the
//     connection is hijacked and closed; nothing is parsed, executed or
//     saved; the body is buffered only so that the request can be counted and
//     matched by operation) and delay (real time, not the simulated clock;
//     the request is abandoned without executing if the client goes away,
//     Close is called or the serving context ends).
//   - Execution faults match only a request that begins executing (a new key,
//     or a v2 re-execution), never a replay, a conflict or a rejected
//     request: reject-validation, 5xx-before-commit (500 api_error, nothing
//     created), 5xx-after-commit (refund created, 500 api_error),
//     lose-response-after-commit (refund created, connection closed without
//     a response), hold-response (refund created, the key stays in
//     progress and the response is withheld until Release, until the client
//     goes away, or until Close) and decline (the refund is committed as
//     declined, Stripe "failed" or Meridian DECLINED: answered 2xx, kept
//     under the key, nothing moved; counted in refunds_declined).
//
// Held reports when a response is being held, so tests wait on a channel,
// never on a sleep.
//
// # Ledger
//
// Every refund-creation request is counted in requests_received as it is
// received, whatever happens next (replays, rejections and dropped
// connections included); refunds_created counts refunds committed that took
// effect, refunds_declined those committed as declined; lookups counts the
// reads (the GETs above). by_operation holds the same
// counters per metadata operation_id (a request whose body names no operation
// is counted in the totals only). The ledger also keeps a log of the most
// recent requests (key, operation, fault, status, result). Administrative
// /_sim requests are not counted.
//
// # Bounds
//
// Bodies are limited to Config.MaxBodyBytes (413 beyond). Remembered keys are
// bounded by time (forgotten oldest first once older than the profile's
// retention, by each creation request at a cost that does not grow with the
// keys kept) and by count (Config.MaxRememberedKeys; a new key
// beyond it gets 429 rate_limit_error, nothing saved). Armed faults are
// bounded by Config.MaxArmedFaults and the request log by
// Config.RequestLogSize (oldest entries dropped; the counters stay exact).
// The refunds themselves and the per-operation counters grow with traffic by
// design: they are the record tests assert on; this is a test tool.
//
// # Clock
//
// The simulated time is Config.Start plus the time elapsed on Config.Clock
// (time.Now by default) since New, plus every Advance. With a clock that
// does not move, time moves only through Advance, which makes key pruning
// deterministic.
package sim
