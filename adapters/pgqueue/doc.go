// Package pgqueue is the Postgres queue, in the transport schema
// (pgstate.DefaultSchema unless configured), which pgstate.Migrate creates
// and upgrades:
//
//   - Queue: the Postgres-only transport for single-machine use. It is a
//     transport.Publisher (the relay inserts into it) and a transport.Source
//     (workers claim from it with FOR UPDATE SKIP LOCKED), and a
//     transport.DeadLetterQueue; messages of every topic live in one table;
//   - Resubmissions: the transport.ResubmissionLog for a dead-letter queue
//     that cannot mark its own entries (the Kafka topic).
//
// What the same schema holds that is not the queue lives with its owner:
// the relays' checkpoints and leader locks in adapters/transport/pgstate,
// every loop's set-aside items in adapters/pgsetaside.
//
// Queue semantics, stated as boundaries. A claim makes a row invisible for
// the visibility timeout and counts an attempt; settling it (acknowledge,
// dead-letter, retry later) is conditional on that attempt, so a worker whose
// claim lapsed and was taken over cannot settle the row under the new owner.
// A worker that dies mid-message gives the row back when the timeout passes:
// delivery is at least once, and the ledger's inbox absorbs the copies. A
// failed attempt (settled as a Retry that is not an outage) hides the row
// for a back-off that doubles per attempt; a row whose counted attempts
// reach MaxAttempts (claimed and never settled, or settled as failed) is
// dead-lettered (delivery.attempts-exhausted, with the attempts and the last
// error) instead of handed out again. An outage of the ledger's store is not
// counted against the message (column uncounted). Messages of one key (one
// operation) are handed out one at a time, in id order, so a failing message
// holds up its own key only. The dead-letter queue is the queue's "set
// aside": `opledger dlq list`.
package pgqueue
