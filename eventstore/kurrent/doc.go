// Package kurrent is the KurrentDB (EventStoreDB) backend of
// eventstore.Store, on github.com/EventStore/EventStore-Client-Go/v4.
//
// Mapping. A stream of the port is a KurrentDB stream of the same name
// (Config.Namespace, empty by default, is prepended when several isolated
// stores share a server, as tests do). Versions are KurrentDB revisions:
// both count from 0, so an exact expected version passes through unchanged;
// NoStream (and Exact(-1)) is the client's NoStream, Any is the client's Any
// (see toExpectedRevision). A wrong expected version becomes a
// *eventstore.WrongExpectedVersionError carrying the stream's revision as the
// server reported it. Event ids are the port's EventData.ID (a UUID), so a
// retried append is deduplicated by the server: with an exact or no-stream
// expected version KurrentDB checks the events at the versions they would
// take, with Any it consults its (bounded) cache of recent event ids.
//
// KurrentDB deduplicates by event id only for a retry: it does not refuse
// an id that is stored elsewhere (another stream, or earlier in the same
// stream when the expected version is the stream's current one). Event ids
// must therefore be unique by construction (the ledger mints a UUIDv7 per
// event); the Postgres and memory backends refuse such duplicates, this one
// cannot.
//
// The global log is $all. A Position is KurrentDB's commit and prepare
// position. ReadAll and Subscribe use a server-side subscription to $all
// filtered on the stream name (Config.StreamPrefixes: opledger's
// "operation-" and "evidence-" by default), so system streams ("$...") and
// other categories never reach the client; system event types ("$...") that
// land in our streams (a tombstone, a link) are dropped by the store. ReadAll
// returns the events strictly after a position, up to a count, and stops at
// the server's caught-up message, which KurrentDB and EventStoreDB 23.10 and
// later send. Append refuses streams outside StreamPrefixes, so nothing this
// store writes is invisible to its own log.
//
// The client library. Measured with no server present, v4.2.0 connects
// lazily: the first call discovers the node and fails after about a second
// with ErrorUnavailable without honouring its context; after that every call
// fails with ErrorCodeConnectionClosed until a new client is made; several
// goroutines making the first call at once can hang forever (their requests
// queue for a connection goroutine that has exited), and Close with calls in
// flight panics (a send on the closed request channel). So the store:
//
//   - shares a client only after one serialized probe (a read) has succeeded
//     on it; concurrent callers wait for that probe, each within its own
//     timeout (connector.go);
//   - retires a client at the first sign of a broken connection (unavailable,
//     closed, deadline exceeded, not leader, or no answer in time) and
//     probes a new one for the next call;
//   - runs every call in a goroutine and returns within Config.CallTimeout
//     even if the client does not (call.go);
//   - counts the calls in flight on each client and closes a client only
//     when none is; a client with a call that never returns is never closed
//     (it leaks that goroutine rather than crash the process).
//
// All of these surface as errors wrapping eventstore.ErrUnavailable.
//
// Do not link this package and github.com/kurrent-io/KurrentDB-Client-Go
// into one binary: both register the same protobuf files (shared.proto,
// streams.proto, ...) and the process panics at start-up.
package kurrent
