package chain_test

import (
	"testing"

	"opledger/eventstore/chain"
)

// A Claimed event and its metadata, as the ledger writes them.
var (
	benchData = []byte(`{"execution_id":"EXE-4471.1","capability_id":"CAP-4471.1","message_id":"MSG-55A","worker_id":"worker-a",` +
		`"attempt":1,"lease_epoch":1,"lease_expires_at":"2026-11-26T14:03:13Z","idempotency_key":"refund-OP-4471-a1","claimed_at":"2026-11-26T14:02:13Z"}`)
	benchMeta = []byte(`{"schema_version":1,"correlation_id":"COR-2210","causation_id":"MSG-55A","actor":"worker-a","recorded_at":"2026-11-26T14:02:13Z"}`)

	// The same, as PostgreSQL's jsonb returns them to the audit: members
	// ordered by (length, bytes) of their names, a space after ':' and ','.
	storedData = []byte(`{"attempt": 1, "worker_id": "worker-a", "claimed_at": "2026-11-26T14:02:13Z", "message_id": "MSG-55A", "lease_epoch": 1, ` +
		`"execution_id": "EXE-4471.1", "capability_id": "CAP-4471.1", "idempotency_key": "refund-OP-4471-a1", "lease_expires_at": "2026-11-26T14:03:13Z"}`)
	storedMeta = []byte(`{"actor": "worker-a", "recorded_at": "2026-11-26T14:02:13Z", "causation_id": "MSG-55A", "correlation_id": "COR-2210", "schema_version": 1}`)
)

// BenchmarkContent measures an event's content digest (RFC 8785
// canonicalization of its data and metadata, then SHA-256): what every
// backend's append and every audit pass pay per event.
func BenchmarkContent(b *testing.B) {
	b.SetBytes(int64(len(benchData) + len(benchMeta)))
	for b.Loop() {
		if _, err := chain.Content("operation-OP-4471", "0193a5c2-7b1e-7000-8000-000000000001", "Claimed", benchData, benchMeta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContentStored is BenchmarkContent over the text a PostgreSQL
// read returns: what the audit pays per event.
func BenchmarkContentStored(b *testing.B) {
	b.SetBytes(int64(len(storedData) + len(storedMeta)))
	for b.Loop() {
		if _, err := chain.Content("operation-OP-4471", "0193a5c2-7b1e-7000-8000-000000000001", "Claimed", storedData, storedMeta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLink measures one chain link (SHA-256 of 89 bytes).
func BenchmarkLink(b *testing.B) {
	var h chain.Hash
	for b.Loop() {
		h = chain.Link(h, 7, chain.Genesis)
	}
}
