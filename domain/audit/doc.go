// Package audit reads the ledger back and checks it: Replay renders one
// operation's stream as a timeline, Verify streams the whole global log once
// and checks every invariant of DESIGN.md against it, and ProviderDiff
// compares the ledger's completed executions with the provider's own export.
//
// The package is pure logic over the eventstore.Store port: it imports no
// driver, reads nothing but the store (never projections), and writes nothing.
//
// # Memory
//
// Verify holds, for every operation stream it has seen, one compact record
// (operationState): a fixed-size header (last version, amounts, latest
// decision, counters) and small sets of 64-bit hashes of the operation's own
// identifiers (capabilities, executions, presented and duplicated message
// ids), each entry a few dozen bytes. Strings are kept only for what is open:
// the id, lease owner and Unknown-since position of an execution that is
// Executing, Unknown or Escalated, dropped when it ends. So memory is
// O(operations + identifiers per operation) small records, plus one page of
// events, plus the listed findings (capped by MaxViolations and
// MaxListedUnknowns). Operations with an open execution are capped by
// VerifyOptions.MaxOpenOperations and all operations by MaxOperations: past
// either cap Verify stops with an error that says which, rather than grow
// without bound; verify a window (From, To) instead.
//
// Identifier hashes are maphash values with a per-run seed and are only ever
// compared within one operation, so a collision needs two of one
// operation's own ids to collide in 64 bits.
//
// ProviderDiff holds one compact record per refund in the provider export
// (O(provider refunds)) and streams the ledger's log once against it.
package audit
