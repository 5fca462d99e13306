// Package inbox makes a consumer's handling of a message take effect once
// per message id, in the consumer's own PostgreSQL transaction: the id is
// recorded under a unique constraint in the same transaction as the
// business change, so the change and the record commit together or not at
// all.
//
// It is for the services downstream of opledger that consume its operation
// feed (GET /v1/feed, or the opledger.operation-feed Kafka topic), whose
// delivery is at least once: the feed's event_id is the message id. It
// works for any message that carries an id its producer chose once and
// keeps on every redelivery (never one the consumer makes up per attempt).
//
// What one effect per message id means here, as boundaries:
//
//   - A redelivery of a handled message (the consumer acknowledged too
//     late, a relay published again, a reader resumed from an older
//     position) finds its id recorded: Handle answers Duplicate and runs
//     nothing.
//   - A concurrent duplicate on another instance waits on the unique
//     index until the first transaction ends: if it committed, the second
//     is Duplicate; if it rolled back, the second handles it.
//   - A crash between the effect and the record cannot happen: they are
//     one transaction. A crash before the commit leaves neither; the
//     redelivery handles the message.
//   - Only effects written through the transaction are covered. An effect
//     outside the database (an e-mail, a call to another service) is not
//     undone by a rollback; make it idempotent at its destination (an
//     Idempotency-Key derived from the message id) or write it to an
//     outbox table in the same transaction.
//   - Ids are kept for Config.Retention (default 30 days) after they were
//     handled, then Prune may delete them; a redelivery later than that is
//     handled again. Choose a retention longer than any redelivery can
//     come (the feed can be read again from any older position, so a
//     consumer that may be rewound further than that also makes its effect
//     naturally idempotent: an UPSERT keyed by what it changes).
//
// The table (DDL, Migrate) holds (consumer, message_id, handled_at) with
// the primary key (consumer, message_id): consumers of different names
// share it without seeing each other's ids. Package inboxtest is the suite
// that shows these properties against your own schema and table.
package inbox
