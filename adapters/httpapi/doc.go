// Package httpapi is opledger's HTTP API: the commands (request an
// operation, decide, claim, renew a lease, record an outcome, revoke,
// resolve an escalation, move the test clock) and the reads (an operation
// with its executions, its event stream, the evidence, the escalation queue),
// plus health, readiness and Prometheus metrics. docs/api.md describes every
// endpoint; docs/openapi.yaml is its OpenAPI 3.1 description.
//
// Every command goes through the ledger's command handler, which stays the
// only judge of what may happen: this package authenticates and authorizes
// the caller (bearer tokens per role, see Tokens), turns JSON into commands
// and refusals into status codes, and turns a capability token into the
// claim it stands for (see adapters/captoken). Reads of operations, evidence
// and escalations come from the read models in projections/ and may trail
// the log by the projection's lag; an operation's event stream is read from
// the store itself.
//
// Errors are always JSON: {"error":{"code":…,"message":…}} with a stable
// code, plus "field" when one request field is at fault. The store being
// unreachable is 503 store.unavailable, and a claim is then never reported as
// Claimed.
package httpapi
