package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"
)

// The Message DB peer: its write_message function (@eventide/message-db
// from npm, which scripts/bench.sh installs at bench time into a database
// of the run's own, --message-db-url), driven by pgbench with prepared
// statements as pgx sends opledger's append. Each client appends one
// message at a time to a stream of its own at the expected version (the
// version write_message returned last), each stream in a category of its
// own: Message DB serializes writers per category, not per stream.

// messageDBGuarantees is what the Message DB figures state beside their
// number.
const messageDBGuarantees = "Message DB 1.3 write_message at the expected version (pgbench, prepared; a stream and a category per client): " +
	"an advisory lock per category, the stream's version read by max(position), one row with three indexes; " +
	"its global_position is a sequence, so a reader of the whole log by position can pass a message that commits later " +
	"below it (no commit-ordered global log), no hash chain, no head hash; opledger: the per-stream lock and streams row " +
	"(version, head hash), the hash chain, the global log read in commit order"

// The event is the size of bench's Claimed (benchEvent).
const messageDBScript = `SELECT write_message(gen_random_uuid()::varchar, 'mdbc' || :client_id::text || 'r' || :run::text || '-1', 'Claimed',
  '{"operation_id":"OP-4471","execution_id":"EXE-4471.1","capability_id":"CAP-4471.1","message_id":"MSG-55A","worker_id":"worker-1","attempt":1,"lease_epoch":1,"lease_expires_at":"2026-11-26T14:03:10Z","idempotency_key":"refund-OP-4471-a1"}'::jsonb,
  '{"schema_version":1,"correlation_id":"COR-2210","causation_id":"MSG-55A","actor":"worker-1","recorded_at":"2026-11-26T14:02:10Z"}'::jsonb,
  :v) AS v \gset
`

var messageDBRuns atomic.Int64

// messageDBRate is one sample: write_message per second over clients
// connections for d, every client on a fresh stream.
func messageDBRate(ctx context.Context, s *settings, clients int, d time.Duration) (float64, error) {
	run := strconv.FormatInt(messageDBRuns.Add(1), 10)
	mdb := *s
	mdb.url = s.mdbURL
	return pgbench(ctx, &mdb, messageDBScript, clients, d, "-M", "prepared", "-D", "v=-1", "-D", "run="+run)
}
