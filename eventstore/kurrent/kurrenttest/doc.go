// Package kurrenttest is an in-process stand-in for a single insecure
// KurrentDB (EventStoreDB) node, for tests of eventstore/kurrent on machines
// that cannot run the real server. It speaks the real gRPC protocol, built
// from EventStore-Client-Go v4's own generated protobuf packages, so the
// backend is exercised through the unmodified client library: discovery,
// connection handling, errors and all.
//
// It implements only what the backend uses:
//
//   - ServerFeatures.GetSupportedMethods and Gossip.Read (the client's
//     connection handshake; gossip reports this one node as an alive leader);
//   - Streams.Append with an expected revision (any, no_stream,
//     stream_exists, an exact revision), with KurrentDB's commit check,
//     including its idempotency rules (see eventLog.append);
//   - Streams.Read of one stream, forwards and backwards, and of $all,
//     forwards and backwards, with or without a filter;
//   - Streams.Read as a subscription to $all, with or without a filter:
//     confirmation, catch-up, checkpoints, caught-up, then live events.
//
// Everything else (deletes, tombstones, stream subscriptions, batch append,
// persistent subscriptions, projections, users, ACLs, stream metadata)
// answers codes.Unimplemented.
//
// Where it differs from KurrentDB, knowingly:
//
//   - The idempotency cache of committed event ids is unbounded; KurrentDB's
//     is bounded by memory, so there a retried append with expected revision
//     Any is deduplicated only while the ids are still cached (exact and
//     no-stream retries are checked against the stream itself in both).
//   - All events of one append carry one "created" timestamp; KurrentDB
//     stamps each prepare record as it writes it, microseconds apart.
//   - Positions are synthetic byte offsets (commit == prepare, as for
//     KurrentDB's implicit transactions), not positions in chunk files.
//   - Nothing is persisted; there is no cluster, no replication, no
//     authentication, no stream metadata, no scavenging, no maximum event
//     count, and regular expressions are Go's (RE2), not .NET's.
//   - Live subscribers never fall behind (no fell-behind message) and are
//     never dropped for being slow.
//
// Server.Tamper rewrites the stored log in place, as someone with access to
// the server's files could, for the audit's tamper-evidence tests.
//
// A Server sits behind a Gate, a TCP front that tests switch between
// serving, refusing connections and accepting connections that are never
// answered, to prove how the backend behaves when the server goes away. A
// Gate can also front a real server (NewGate).
package kurrenttest
