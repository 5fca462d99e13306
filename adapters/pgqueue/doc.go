// Package pgqueue keeps the transport's state in Postgres, in a schema of its
// own (DefaultSchema unless configured), created and upgraded only by
// Migrate:
//
//   - Checkpoints: where each transport.Relay stands in the global log;
//   - Queue: the Postgres-only transport for single-machine use. It is a
//     transport.Publisher (the relay inserts into it) and a transport.Source
//     (workers claim from it with FOR UPDATE SKIP LOCKED), and a
//     transport.DeadLetterQueue; messages of every topic live in one table;
//   - Resubmissions: the transport.ResubmissionLog for a dead-letter queue
//     that cannot mark its own entries (the Kafka topic);
//   - SetAside: the setaside.Store of every loop (the relay's and the Kafka
//     consumer's failing items among them);
//   - NewLeader: a relay's follow.Leadership (a pgleader.Lock, keyed per relay).
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
