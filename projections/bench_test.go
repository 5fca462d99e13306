package projections_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// BenchmarkCatchUp measures the projector catching up on a log of
// OPLEDGER_BENCH_EVENTS events (scripts/bench-projections.sh: 1,000,000),
// beside two ceilings read from the same rows in the same run: a plain COPY
// of the events table in log order, and ReadAll through the port; and
// beside a floor: the rows the catch-up left in the read models, written
// into fresh ones at once (one binary COPY per table), the least its writes
// can cost. Each of OPLEDGER_BENCH_ROUNDS rounds (default 3) runs all four,
// the projector into a fresh schema; the medians are reported. Beside the rates it
// reports the CPU each took, the benchmark's own and (when the server runs
// on this machine) the server processes' of its database: CPU time does not
// stretch when other work shares the cores, so it says where the cost lies
// on a busy machine (cpu-ratio-to-copy: COPY's CPU over the projector's).
// It is skipped unless OPLEDGER_BENCH_EVENTS is set: generating the log
// takes a while.
//
// The log is realistic: a template of a few hundred operations written by
// the command handler (completions, duplicates, replays, Unknowns
// reconciled or escalated, lapsed leases and late outcomes, retries,
// denials, refused writes, unattributed evidence), replicated under new
// identifiers by INSERT ... SELECT generate_series until the log holds the
// requested number of events.
func BenchmarkCatchUp(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("OPLEDGER_BENCH_EVENTS"))
	if n <= 0 {
		b.Skip("set OPLEDGER_BENCH_EVENTS (scripts/bench-projections.sh) to run")
	}
	rounds, _ := strconv.Atoi(os.Getenv("OPLEDGER_BENCH_ROUNDS"))
	rounds = max(rounds, 1)
	batch, _ := strconv.Atoi(os.Getenv("OPLEDGER_BENCH_BATCH"))
	url, storeSchema := pgtest.Schema(b)
	store := pgtest.OpenMigrated(b, url, storeSchema)
	pool := openBenchPool(b, url)

	start := time.Now()
	writeTemplate(b, store, 300)
	template := replicate(b, pool, storeSchema, n)
	waitReadable(b, pool, store)
	b.Logf("generated %d events (template %d) in %s", n, template, time.Since(start).Round(time.Millisecond))

	var copyRates, readRates, projectRates, writeRates []float64
	var copyCPU, readCPU, projectCPU, writeCPU []cost
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			c := timeCopy(b, pool, storeSchema, n)
			r := timeReadAll(b, pool, store, n)
			p, rows := timeProjector(b, pool, store, batch, n)
			w := timeWriteRows(b, pool, rows)
			copyRates = append(copyRates, float64(n)/c.wall.Seconds())
			readRates = append(readRates, float64(n)/r.wall.Seconds())
			projectRates = append(projectRates, float64(n)/p.wall.Seconds())
			writeRates = append(writeRates, float64(n)/w.wall.Seconds())
			copyCPU, readCPU, projectCPU, writeCPU = append(copyCPU, c), append(readCPU, r), append(projectCPU, p), append(writeCPU, w)
			b.Logf("round %d: copy %.0f ev/s, ReadAll %.0f ev/s, projector %.0f ev/s (%s), its rows written at once %.0f ev/s; CPU: copy %s, ReadAll %s, projector %s, rows %s",
				round+1, copyRates[len(copyRates)-1], readRates[len(readRates)-1], projectRates[len(projectRates)-1], p.wall.Round(time.Millisecond), writeRates[len(writeRates)-1], c, r, p, w)
		}
	}
	b.StopTimer()
	c, r, p := median(copyRates), median(readRates), median(projectRates)
	b.ReportMetric(p, "events/s")
	b.ReportMetric(r, "readall-events/s")
	b.ReportMetric(c, "copy-events/s")
	b.ReportMetric(p/c, "ratio-to-copy")
	b.Logf("medians over %d rounds of %d events: projector %.0f ev/s, ReadAll %.0f ev/s, COPY %.0f ev/s; projector/COPY %.3f, ReadAll/COPY %.3f",
		len(projectRates), n, p, r, c, p/c, r/c)
	wr := median(writeRates)
	b.ReportMetric(wr, "rows-written-events/s")
	b.Logf("the projector's rows written at once (one binary COPY per table): %.0f ev/s, %.3f of COPY", wr, wr/c)
	cc, rc, pc, wc := medianCost(copyCPU), medianCost(readCPU), medianCost(projectCPU), medianCost(writeCPU)
	b.Logf("median CPU over %d rounds: COPY %s, ReadAll %s, projector %s, its rows written at once %s", len(projectCPU), cc, rc, pc, wc)
	if cc.server >= 0 && pc.server >= 0 {
		b.ReportMetric((cc.client+cc.server).Seconds()/(pc.client+pc.server).Seconds(), "cpu-ratio-to-copy")
		b.Logf("COPY's CPU / projector's CPU %.3f (server %.3f, client %.3f)",
			(cc.client+cc.server).Seconds()/(pc.client+pc.server).Seconds(), cc.server.Seconds()/pc.server.Seconds(), cc.client.Seconds()/pc.client.Seconds())
	}
}

// cost is what reading or folding the log took: wall time, and the CPU of
// the benchmark's process (client) and of the database's server processes
// (server; < 0: not known).
type cost struct {
	wall, client, server time.Duration
}

func (c cost) String() string {
	if c.server < 0 {
		return fmt.Sprintf("client %.2fs", c.client.Seconds())
	}
	return fmt.Sprintf("client %.2fs + server %.2fs", c.client.Seconds(), c.server.Seconds())
}

// measure runs f and returns its cost.
func measure(b *testing.B, pool *pgxpool.Pool, f func()) cost {
	b.Helper()
	mark, err := markCPU(b.Context(), pool)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	f()
	wall := time.Since(start)
	client, server, err := cpuSince(b.Context(), pool, mark)
	if err != nil {
		b.Fatal(err)
	}
	return cost{wall: wall, client: client, server: server}
}

// medianCost is the median of each part on its own.
func medianCost(cs []cost) cost {
	part := func(f func(cost) time.Duration) time.Duration {
		xs := make([]float64, len(cs))
		for i, c := range cs {
			xs[i] = float64(f(c))
		}
		return time.Duration(median(xs))
	}
	return cost{
		wall:   part(func(c cost) time.Duration { return c.wall }),
		client: part(func(c cost) time.Duration { return c.client }),
		server: part(func(c cost) time.Duration { return c.server }),
	}
}

func openBenchPool(b *testing.B, url string) *pgxpool.Pool {
	b.Helper()
	pool, err := pgxpool.New(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// writeTemplate writes ops operations' histories through the command
// handler.
func writeTemplate(b *testing.B, store eventstore.Store, ops int) {
	b.Helper()
	ctx := b.Context()
	c := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	h, err := ledger.New(ledger.Config{Store: store, Clock: c})
	if err != nil {
		b.Fatal(err)
	}
	must := func(err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
	}
	by := ledger.Cause{Actor: "bench"}
	for i := range ops {
		op := domain.OperationID(fmt.Sprintf("OP-%04d", i))
		msg := func(k int) domain.MessageID { return domain.MessageID(fmt.Sprintf("MSG-%04d-%d", i, k)) }
		_, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: fmt.Sprintf("ORD-%04d", i),
			AmountMinor: int64(1000 + i), Currency: "EUR", OrderTotalMinor: 100_000, CorrelationID: domain.CorrelationID(fmt.Sprintf("COR-%04d", i))}, by)
		must(err)
		facts := domain.Facts{OrderRefundable: true}
		if i%8 == 4 {
			facts.ChargebackOpen = true // denied
		}
		_, _, err = h.Decide(ctx, op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: facts}, by)
		must(err)
		if i%8 == 4 {
			continue
		}
		capID, err := h.IssueCapability(ctx, op, domain.IssueCapability{}, by)
		must(err)
		out, err := h.Claim(ctx, op, domain.Claim{MessageID: msg(1), CapabilityID: capID.CapabilityID, WorkerID: "worker-a"})
		must(err)
		x := out.ExecutionID
		record := func(o domain.Outcome, ref string) {
			must(h.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: o, ProviderReference: ref}, by))
		}
		switch i % 8 {
		case 0, 7: // completed; duplicate delivery; the unattributed kind too
			_, err = h.RenewLease(ctx, op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret}, by)
			must(err)
			record(domain.Completed, "re_"+string(op))
			_, err = h.Claim(ctx, op, domain.Claim{MessageID: msg(1), CapabilityID: capID.CapabilityID, WorkerID: "worker-b"})
			must(err)
			if i%8 == 7 {
				_, err = h.Claim(ctx, domain.OperationID("OP-NOPE-"+strconv.Itoa(i)), domain.Claim{MessageID: msg(9), CapabilityID: "CAP-FORGED", WorkerID: "worker-x"})
				must(err)
			}
		case 1: // Unknown, reconciled
			record(domain.Unknown, "")
			must(h.Reconcile(ctx, op, domain.Reconcile{ExecutionID: x, Outcome: domain.Completed, Method: domain.MethodProviderLookup, ProviderReference: "re_" + string(op)}, by))
		case 2: // lease lapsed, stale write refused, late outcome
			c.Advance(domain.DefaultLeaseDuration)
			_, err = h.LapseLease(ctx, op, domain.LapseLease{ExecutionID: x}, by)
			must(err)
			if err := h.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: domain.Completed}, by); err == nil {
				b.Fatal("a stale write was accepted")
			}
			must(h.RecordLateOutcome(ctx, op, domain.RecordLateOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_" + string(op)}, by))
		case 3: // NotApplied, then a second attempt that completes
			record(domain.NotApplied, "")
			_, _, err = h.Decide(ctx, op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: facts}, by)
			must(err)
			capID, err = h.IssueCapability(ctx, op, domain.IssueCapability{}, by)
			must(err)
			out, err = h.Claim(ctx, op, domain.Claim{MessageID: msg(2), CapabilityID: capID.CapabilityID, WorkerID: "worker-a"})
			must(err)
			x = out.ExecutionID
			record(domain.Completed, "re_"+string(op))
		case 5: // completed, then replayed on a new message
			record(domain.Completed, "re_"+string(op))
			_, err = h.Claim(ctx, op, domain.Claim{MessageID: msg(3), CapabilityID: capID.CapabilityID, WorkerID: "worker-c"})
			must(err)
		case 6: // Unknown, escalated, resolved by an operator
			record(domain.Unknown, "")
			must(h.Escalate(ctx, op, domain.Escalate{ExecutionID: x, Reason: "lookup inconclusive"}, by))
			must(h.Reconcile(ctx, op, domain.Reconcile{ExecutionID: x, Outcome: domain.NotApplied, Method: domain.MethodOperator, Actor: "ops-1", Evidence: "provider dashboard"}, by))
		}
	}
}

// replicateSQL copies the template events (global_position <= $1) once per
// k in [$2, $3], prefixing every identifier with k-: streams, ids in the
// data and the metadata, fresh event ids. The unattributed streams' (one a day)
// versions are shifted past the template's ($4 events per copy). $5 bounds
// the rows of the last chunk.
const replicateSQL = `INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata)
SELECT regexp_replace(t.stream_id, '(OP)-', '\1-' || k || '-'),
       CASE WHEN t.stream_id LIKE 'evidence-unattributed%%' THEN t.stream_version + k * $4::bigint ELSE t.stream_version END,
       gen_random_uuid(), t.event_type,
       regexp_replace(t.data::text, '(OP|EXE|CAP|DEC|MSG|COR)-', '\1-' || k || '-', 'g')::jsonb,
       regexp_replace(t.metadata::text, '(OP|EXE|CAP|DEC|MSG|COR)-', '\1-' || k || '-', 'g')::jsonb
FROM generate_series($2::bigint, $3::bigint) AS k, %[1]s.events t
WHERE t.global_position <= $1
ORDER BY k, t.global_position
LIMIT $5`

// replicate grows the log (the template) to n events, a chunk of copies
// per transaction, and returns the template's size. The template is counted
// in the table: ReadAll may not see its last events yet.
func replicate(b *testing.B, pool *pgxpool.Pool, schema string, n int) int {
	b.Helper()
	ctx := b.Context()
	ident := pgx.Identifier{schema}.Sanitize()
	var lastTemplate, evidence, template int64
	if err := pool.QueryRow(ctx, `SELECT max(global_position), count(*) FILTER (WHERE stream_id LIKE 'evidence-unattributed%'), count(*) FROM `+ident+`.events`).
		Scan(&lastTemplate, &evidence, &template); err != nil {
		b.Fatal(err)
	}
	const copiesPerChunk = 40 // ~100,000 events per transaction
	sql := fmt.Sprintf(replicateSQL, ident)
	have := int(template)
	for k := int64(1); have < n; k += copiesPerChunk {
		tag, err := pool.Exec(ctx, sql, lastTemplate, k, k+copiesPerChunk-1, evidence, n-have)
		if err != nil {
			b.Fatalf("replicate: %v", err)
		}
		have += int(tag.RowsAffected())
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+ident+`.streams (stream_id, version)
SELECT stream_id, max(stream_version) FROM `+ident+`.events GROUP BY stream_id
ON CONFLICT (stream_id) DO UPDATE SET version = EXCLUDED.version`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+ident+`.events`); err != nil {
		b.Fatal(err)
	}
	return int(template)
}

// waitReadable waits (bounded) until ReadAll reaches the last event.
func waitReadable(b *testing.B, pool *pgxpool.Pool, store *postgres.Store) {
	b.Helper()
	var last postgres.Position
	if err := pool.QueryRow(b.Context(), `SELECT transaction_id, global_position FROM `+pgx.Identifier{store.Schema()}.Sanitize()+
		`.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1`).Scan(&last.TransactionID, &last.GlobalPosition); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		head, err := store.Head(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if head.Compare(last) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("the log's end never became readable: a transaction stays open on the server")
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
}

// timeCopy reads every event row in log order with COPY ... TO STDOUT.
func timeCopy(b *testing.B, pool *pgxpool.Pool, schema string, n int) cost {
	b.Helper()
	conn, err := pool.Acquire(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	sql := `COPY (SELECT global_position, transaction_id, stream_id, stream_version, event_id, event_type, data, metadata, recorded_at
FROM ` + pgx.Identifier{schema}.Sanitize() + `.events ORDER BY transaction_id, global_position) TO STDOUT`
	var tag pgconn.CommandTag
	c := measure(b, pool, func() { tag, err = conn.Conn().PgConn().CopyTo(b.Context(), io.Discard, sql) })
	if err != nil || tag.RowsAffected() != int64(n) {
		b.Fatalf("copy: %d rows, %v", tag.RowsAffected(), err)
	}
	return c
}

// timeReadAll reads the whole log through the port, a page of
// projections.DefaultBatchSize at a time.
func timeReadAll(b *testing.B, pool *pgxpool.Pool, store eventstore.Store, n int) cost {
	b.Helper()
	read := 0
	c := measure(b, pool, func() {
		var after eventstore.Position
		for {
			page, err := store.ReadAll(b.Context(), after, projections.DefaultBatchSize)
			if err != nil {
				b.Fatal(err)
			}
			read += len(page)
			if len(page) < projections.DefaultBatchSize {
				break
			}
			after = page[len(page)-1].Position
		}
	})
	if read != n {
		b.Fatalf("ReadAll read %d events, want %d", read, n)
	}
	return c
}

// timeProjector catches a projector up from the start into a fresh schema,
// and returns the rows it wrote.
func timeProjector(b *testing.B, pool *pgxpool.Pool, store eventstore.Store, batch, n int) (cost, []tableRows) {
	b.Helper()
	ctx := b.Context()
	_, schema := pgtest.Schema(b)
	if _, err := projections.Migrate(ctx, pool, schema); err != nil {
		b.Fatal(err)
	}
	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: schema, BatchSize: batch, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	var applied int64
	c := measure(b, pool, func() { applied, err = p.CatchUp(ctx) })
	if err != nil || applied != int64(n) {
		b.Fatalf("catch-up applied %d of %d events: %v", applied, n, err)
	}
	rows := dumpRows(b, pool, schema)
	if _, err := pool.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		b.Fatal(err)
	}
	return c, rows
}

// tableRows is a read model's rows in PostgreSQL's binary COPY format.
type tableRows struct {
	table string
	data  []byte
}

// dumpRows reads every row a catch-up left in schema's tables, but its
// checkpoint's.
func dumpRows(b *testing.B, pool *pgxpool.Pool, schema string) []tableRows {
	b.Helper()
	ctx := b.Context()
	rows, err := pool.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
WHERE s.nspname = $1 AND c.relkind = 'r' AND c.relname NOT IN ('projection_checkpoints', 'schema_migrations')
ORDER BY c.relname`, schema)
	if err != nil {
		b.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	var out []tableRows
	for _, t := range tables {
		var buf bytes.Buffer
		tag, err := conn.Conn().PgConn().CopyTo(ctx, &buf, `COPY `+pgx.Identifier{schema, t}.Sanitize()+` TO STDOUT (FORMAT binary)`)
		if err != nil {
			b.Fatal(err)
		}
		if tag.RowsAffected() > 0 {
			out = append(out, tableRows{table: t, data: buf.Bytes()})
		}
	}
	return out
}

// timeWriteRows writes rows into fresh read models (migrated untimed), one
// binary COPY per table in one transaction: the least a catch-up's writes
// can cost, every index and constraint maintained.
func timeWriteRows(b *testing.B, pool *pgxpool.Pool, rows []tableRows) cost {
	b.Helper()
	ctx := b.Context()
	_, schema := pgtest.Schema(b)
	if _, err := projections.Migrate(ctx, pool, schema); err != nil {
		b.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	c := measure(b, pool, func() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(r.data), `COPY `+pgx.Identifier{schema, r.table}.Sanitize()+` FROM STDIN (FORMAT binary)`); err != nil {
				b.Fatalf("write %s: %v", r.table, err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
	})
	if _, err := pool.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		b.Fatal(err)
	}
	return c
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
