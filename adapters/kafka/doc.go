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
// next offset to read) only after the message's HandleFunc returned Ack, or
// after the message was written to the dead-letter topic (acknowledged by
// all in-sync replicas) when it returned DeadLetter. A message whose result
// could not be recorded (Retry) is handled again in place, with a bounded
// back-off; after MaxRetries the partition is given back (the generation
// ends and the group rejoins), and it is read again from the committed
// offset. A failed commit does the same. So every message is handled at
// least once, in partition order, and copies are what the ledger's inbox
// absorbs (DuplicateDelivery). A rebalance or a stop lets the message in
// flight finish within DrainTimeout and commits it if the generation still
// allows it; otherwise the next owner reads it again.
package kafka
