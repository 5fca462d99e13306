// Package kafka is the Kafka transport, on github.com/segmentio/kafka-go:
//
//   - Publisher: a transport.Publisher (the relays publish refund requests
//     and security signals through it), keyed by operation id so that one
//     operation's messages keep their order in one partition;
//   - Consumer: a transport.Source, a consumer group that runs one
//     goroutine per assigned partition, each with its own partition reader,
//     so a slow provider call holds up only its own partition and at most
//     one message per assigned partition is in flight;
//   - DeadLetters: the transport.DeadLetterQueue over the dead-letter topic,
//     for `opledger dlq list` and `opledger dlq resubmit`.
//
// Offsets, stated as boundaries. A partition's offset is committed (as the
// next offset to read) only past messages whose HandleFunc returned Ack, or
// that were written to the dead-letter topic (acknowledged by all in-sync
// replicas) when it returned DeadLetter or ran out of attempts; messages of
// a partition are handled one after the other, so every offset committed
// follows only messages the ledger recorded. Commits are batched
// (ConsumerConfig.CommitEvery, CommitInterval): one per several messages,
// and at once when the partition has nothing more to read or is given
// back. So every message is handled at least once, in partition order, and
// copies are what the ledger's inbox absorbs (DuplicateDelivery): a crash
// re-reads at most the messages since the last commit. A rebalance or a
// stop lets the message in flight finish within DrainTimeout and commits
// what was acknowledged if the generation still allows it; otherwise the
// next owner reads it again. A failed commit gives the partition back (the
// generation ends and the group rejoins), and it is read again from the
// committed offset.
//
// A failing message does not block its partition for ever. A Retry that is
// not an outage (transport.IsOutage: the ledger's store unavailable, or the
// handling cut short) is a failed attempt, counted in the set-aside store
// (ConsumerConfig.SetAside, role kafka, item
// "<group>/<topic>/<partition>@<offset>"), so the count survives restarts
// and rebalances: whoever owns the partition next reads it when the
// partition is assigned and goes on from there. The partition waits out the
// policy's back-off between attempts (order within it holds; other
// partitions flow), and at Policy.MaxAttempts the message is dead-lettered
// (delivery.attempts-exhausted, with opledger-dlq-attempts and the last
// error), committed, and its count cleared. An outage is retried in place
// without counting, for as long as the generation lives.
package kafka
