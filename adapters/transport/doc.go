// Package transport carries refund requests from the ledger to workers and
// keeps every guarantee on the transport side stated as a boundary. It holds
// what every transport shares; adapters/kafka and adapters/pgqueue implement
// the Kafka and the Postgres-only transports.
//
// The log is the outbox. A Relay follows the global log from its own
// checkpoint and publishes one message per CapabilityIssued event (and one
// security signal per replay-suspected refusal). A message's id is derived
// from the event's id, so a relay that publishes again after a crash (it
// published, then died before saving its checkpoint) publishes the very same
// message ids, and the worker's inbox answers them DuplicateDelivery.
//
// A relay is a follow.Follower: it holds a follow.Leadership while it
// publishes (pgstate.NewLeader on PostgreSQL), so N instances publish each
// message once; a standby takes
// over when the leader's lock session dies. An event the relay cannot turn
// into a message is retried a bounded number of times, then set aside
// (setaside.RoleRelay) and skipped; a transport it cannot reach is an
// outage, retried with a bounded back-off and reported in Relay.Status.
//
// The worker side is a Source (Kafka consumer group, or the Postgres queue)
// calling a HandleFunc per message; Dispatcher is the HandleFunc every
// Source is given. It decodes the message, hands it to the worker role and
// says what the Source must do with it: acknowledge it (the ledger recorded
// the result), dead-letter it (bad input, recorded as evidence first), or
// retry it (nothing could be recorded; never acknowledge). A Source
// acknowledges a message only after its HandleFunc returned, so delivery is
// at least once and never more than the inbox can absorb.
//
// Dead letters never disappear: they stay in the dead-letter queue until an
// operator resubmits them, under new message ids. The ledger, not the tool,
// stops a copy that carries spent authority: AlreadyConsumed with replay
// suspected, which the signals relay publishes for whoever owns the tool.
//
// Nothing here claims more than that: duplicate effects are prevented by the
// ledger within its boundaries, not by the transport.
package transport
