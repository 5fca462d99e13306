// Command example is a service downstream of opledger, written as a team
// would write one: it follows the operation feed and keeps a table of the
// refunds issued (refunds_issued, one row per refund), so that a support
// portal can say "refund issued" without asking the ledger.
//
// It uses both techniques of idempotent consumers:
//
//   - the inbox (package inbox): each feed entry is handled in one
//     transaction that first records its event_id under the inbox's
//     unique key, so a redelivered entry (the feed read again from an
//     older position, a Kafka message redelivered after a crash before
//     its commit, a second instance handling it at the same moment) is a
//     Duplicate that changes nothing;
//   - natural idempotency: the row is written with an UPSERT keyed by the
//     operation, so even an entry delivered again after its id left the
//     inbox's retention leaves the same one row.
//
// Where it stands in the feed is saved in the same transaction as each
// entry it handled (HTTP), or committed to its Kafka consumer group after
// the transaction (Kafka): a crash between the two delivers again what the
// inbox absorbs.
//
// Run it against a serve, with a subscriber token:
//
//	go run ./inbox/example --feed-url http://127.0.0.1:8080 --token "$SUBSCRIBER" \
//	    --database-url postgres://postgres@127.0.0.1:5432/portal
//	go run ./inbox/example --kafka-brokers 127.0.0.1:9092 --database-url ...   # the Kafka topic instead
package main
