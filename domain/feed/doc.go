// Package feed is the operation feed: every change of an operation's state,
// read from the global log, for the services downstream of opledger (a
// support portal, a finance ledger). The API serves it over HTTP (GET
// /v1/feed) and a relay publishes the same entries to a Kafka topic.
//
// One place maps events to feed states (change.go); the codec's coverage
// test holds it to an explicit case for every registered event type.
//
// An entry names its event (EventID, stable: the event's id in the store),
// its operation, the state the operation moved to, the operation's amount
// and references, and its Position in the log. Delivery is at least once
// and in the log's order, so in order per operation: a consumer that reads
// again from an older position, or a relay that publishes a batch again
// after a crash, delivers the same entries under the same event ids. A
// consumer deduplicates by EventID (package inbox does it in the
// consumer's own transaction) or makes its effect idempotent (an UPSERT
// keyed by operation, guarded by StreamVersion).
//
// The feed is gap-free in the log's order because it reads with
// eventstore.Store.ReadAll, which never returns an event while an earlier
// one may still commit: a reader that resumes after the last Position it
// received never skips an entry.
package feed
