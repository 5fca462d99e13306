// Package audit reads the ledger back and checks it: Replay renders one
// operation's stream as a timeline, Verify streams the whole global log once
// and checks every invariant of docs/design.md against it, and ProviderDiff
// compares the ledger's completed executions with the provider's own export.
//
// Tamper evidence (docs/audit.md): Verify also recomputes every event's hash
// chain (package eventstore/chain) and compares the store's stream heads with
// the log; Digester and MakeDigest sign RFC 6962 Merkle digests of the whole
// log (a key of their own, DigestSigner), which Verify checks the log
// against and locates the first departure from; Prove and CheckProof make and
// check, offline, a proof of one operation's events.
//
// The package is pure logic over the eventstore.Store port: it imports no
// driver, reads nothing but the store (never projections), and writes nothing.
//
// # Memory
//
// Verify holds, for every operation stream it has seen, one compact record
// (operationState): a fixed header (last version, amounts, latest decision,
// counters) and small sets of 64-bit hashes of the operation's own
// identifiers: capabilities (40 bytes each), executions (72), presented and
// duplicated message ids (8). Strings are kept only for what is open: the
// id and the Unknown-since record of an execution that is Executing,
// Unknown or Escalated, dropped when it ends. Nothing else grows with the
// log: events are read in pages (at most three pages in memory: one being
// checked, one decoded ahead, one being read), and the findings listed are
// capped (MaxViolations, MaxListedUnknowns; all are counted).
//
// The hash-chain check keeps one 40-byte record per stream (its last
// version and hash) besides the key; the digest checks O(log n) hashes and
// the digest's own block roots (at most 1,024).
//
// So memory is O(operations) records of about 600 bytes for a typical
// operation (measured by scripts/bench-audit.sh: 593 bytes of live heap per
// operation over 125,006 operations, 1,000,048 events), plus three pages.
// Two bounds turn growth into an error (ErrLimitExceeded) instead of an
// out-of-memory kill: VerifyOptions.MaxOperations (default 2,000,000, about
// 1.2 GB) and MaxOpenOperations (default 250,000). Past them, verify windows
// (From, To): only the operations a window touches are held.
//
// Identifier hashes are maphash values with a per-run seed and are only ever
// compared within one operation, so a collision needs two of one
// operation's own ids to collide in 64 bits.
//
// ProviderDiff holds one compact record per refund in the provider export
// (O(provider refunds)) and streams the ledger's log once against it.
package audit
