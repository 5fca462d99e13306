package audit_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// TestBenchAudit is the audit benchmark's driver, run by scripts/bench-audit.sh
// and skipped unless OPLEDGER_BENCH_AUDIT names a mode:
//
//	seed         (re)create the schema and fill it with OPLEDGER_BENCH_EVENTS
//	             events (default 1,000,000): copies of the story's operations
//	             under new operation ids, interleaved, 1,000 copies per
//	             transaction
//	measure      OPLEDGER_BENCH_ROUNDS rounds (default 5) of the ceiling (a
//	             plain COPY of the same rows in the same order) and Verify,
//	             printing medians, the ratio and Verify's peak heap
//	verify-once  one Verify (for /usr/bin/time -v)
//	copy-once    one COPY to nowhere (for /usr/bin/time -v)
//	digest-once  one MakeDigest and one Verify against it, beside one
//	             Verify without (the digest's cost on a large log)
//	drop         drop the schema
//
// The schema is OPLEDGER_BENCH_SCHEMA (default opledger_bench_audit) on
// DATABASE_URL (default pgtest.DefaultURL).
func TestBenchAudit(t *testing.T) {
	mode := os.Getenv("OPLEDGER_BENCH_AUDIT")
	if mode == "" {
		t.Skip("benchmark driver: set OPLEDGER_BENCH_AUDIT (see scripts/bench-audit.sh)")
	}
	b := benchEnv{t: t, ctx: context.Background(), url: pgtest.URL(),
		schema: envOr("OPLEDGER_BENCH_SCHEMA", "opledger_bench_audit"),
		events: envInt(t, "OPLEDGER_BENCH_EVENTS", 1_000_000), rounds: envInt(t, "OPLEDGER_BENCH_ROUNDS", 5),
		page: envInt(t, "OPLEDGER_BENCH_PAGE", audit.DefaultPageSize)}
	switch mode {
	case "seed":
		b.seed()
	case "measure":
		b.measure()
	case "verify-once":
		d, rep, _, _ := b.verify()
		fmt.Printf("verify-once: %s, %d events, ok=%t\n", d.Round(time.Millisecond), rep.Events, rep.OK())
	case "copy-once":
		d, rows := b.copyAll()
		fmt.Printf("copy-once: %s, %d rows\n", d.Round(time.Millisecond), rows)
	case "digest-once":
		b.digestOnce()
	case "drop":
		conn := b.connect()
		defer conn.Close(b.ctx)
		_, err := conn.Exec(b.ctx, "DROP SCHEMA IF EXISTS "+b.ident()+" CASCADE")
		require.NoError(t, err)
	default:
		t.Fatalf("OPLEDGER_BENCH_AUDIT=%q: want seed, measure, verify-once, copy-once, digest-once or drop", mode)
	}
}

type benchEnv struct {
	t      *testing.T
	ctx    context.Context
	url    string
	schema string
	events int
	rounds int
	page   int
}

func (b benchEnv) ident() string { return pgx.Identifier{b.schema}.Sanitize() }

func (b benchEnv) connect() *pgx.Conn {
	conn, err := pgx.Connect(b.ctx, b.url)
	require.NoError(b.t, err, "connect to %s", postgres.RedactURL(b.url))
	return conn
}

// seed writes the story with the real handler into a memory store once,
// then has Postgres multiply it: each copy's operation ids (and so their
// provider keys) get a suffix; the shared evidence stream's versions
// continue; event ids are fresh.
func (b benchEnv) seed() {
	t, ctx := b.t, b.ctx
	mem := memory.New(nil)
	n := newStory(t, mem).write()
	tmpl, err := mem.ReadAll(ctx, nil, int(n))
	require.NoError(t, err)
	evidencePerCopy := 0
	for _, e := range tmpl {
		if e.StreamID == domain.EvidenceStream {
			evidencePerCopy++
		}
	}
	copies := (b.events + len(tmpl) - 1) / len(tmpl)

	conn := b.connect()
	defer conn.Close(ctx)
	s := b.ident()
	for _, q := range []string{"DROP SCHEMA IF EXISTS " + s + " CASCADE", "CREATE SCHEMA " + s} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	_, err = postgres.Migrate(ctx, conn, b.schema)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE UNLOGGED TABLE "+s+".bench_template (seq int, stream_id text, op text, stream_version bigint, event_type text, data text, metadata jsonb)")
	require.NoError(t, err)
	rows := make([][]any, len(tmpl))
	for i, e := range tmpl {
		op, _ := domain.OperationIDFromStream(e.StreamID)
		if of, ok := domain.OperationIDFromEvidenceStream(e.StreamID); ok {
			op = of // its copies are the evidence of the operation's copies
		}
		rows[i] = []any{i, e.StreamID, string(op), e.Version, e.Type, string(e.Data), string(e.Metadata)}
	}
	_, err = conn.CopyFrom(ctx, pgx.Identifier{b.schema, "bench_template"},
		[]string{"seq", "stream_id", "op", "stream_version", "event_type", "data", "metadata"}, pgx.CopyFromRows(rows))
	require.NoError(t, err)

	insert := `INSERT INTO ` + s + `.events (stream_id, stream_version, event_id, event_type, data, metadata)
SELECT CASE WHEN t.op = '' THEN t.stream_id ELSE t.stream_id || '-' || lpad(g::text, 7, '0') END,
       CASE WHEN t.op = '' THEN (g - 1) * $3::bigint + t.stream_version ELSE t.stream_version END,
       gen_random_uuid(), t.event_type,
       (CASE WHEN t.op = '' THEN t.data ELSE replace(t.data, t.op, t.op || '-' || lpad(g::text, 7, '0')) END)::jsonb,
       t.metadata
FROM ` + s + `.bench_template t, generate_series($1::int, $2::int) g
ORDER BY t.seq, g`
	const perTransaction = 1000 // copies interleaved in one transaction
	start := time.Now()
	for first := 1; first <= copies; first += perTransaction {
		_, err := conn.Exec(ctx, insert, first, min(first+perTransaction-1, copies), evidencePerCopy)
		require.NoError(t, err)
	}
	for _, q := range []string{
		"INSERT INTO " + s + ".streams SELECT stream_id, max(stream_version) FROM " + s + ".events GROUP BY stream_id",
		"DROP TABLE " + s + ".bench_template",
		"VACUUM ANALYZE " + s + ".events",
		"VACUUM ANALYZE " + s + ".streams",
	} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err)
	}
	var total int64
	var size string
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), pg_size_pretty(pg_total_relation_size('"+s+".events')) FROM "+s+".events").Scan(&total, &size))
	fmt.Printf("seed: %d template events (%d operations + evidence) x %d copies = %d events, %s on disk, written in %s\n",
		len(tmpl), len(storyOperations), copies, total, size, time.Since(start).Round(time.Millisecond))
}

// copyAll streams the events, as ReadAll orders and selects them, to nowhere.
func (b benchEnv) copyAll() (time.Duration, int64) {
	conn := b.connect()
	defer conn.Close(b.ctx)
	q := `COPY (SELECT global_position, transaction_id, stream_id, stream_version, event_id, event_type, data, metadata, recorded_at
FROM ` + b.ident() + `.events ORDER BY transaction_id, global_position) TO STDOUT`
	start := time.Now()
	tag, err := conn.PgConn().CopyTo(b.ctx, io.Discard, q)
	require.NoError(b.t, err)
	return time.Since(start), tag.RowsAffected()
}

// verify runs Verify over the schema and returns its duration, its report,
// the peak of heap objects (live and not yet collected) sampled while it
// ran, and the peak of the live heap the collector measured.
func (b benchEnv) verify() (time.Duration, audit.Report, uint64, uint64) {
	store, err := postgres.Open(b.ctx, postgres.Config{URL: b.url, Schema: b.schema, MaxConns: 2})
	require.NoError(b.t, err)
	defer store.Close()
	runtime.GC()
	stop := make(chan struct{})
	var peak, live uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // samples the heap every 2 ms until Verify returns
		defer wg.Done()
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak, live = max(peak, sample[0].Value.Uint64()), max(live, sample[1].Value.Uint64())
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	// The seeded rows are multiplied by SQL, which cannot hash them: they
	// read as stored before hashing began. Verify recomputes their hashes
	// all the same (the chain check's cost is measured) and reports them.
	rep, err := audit.Verify(b.ctx, store, audit.VerifyOptions{PageSize: b.page, AllowUnhashed: true})
	d := time.Since(start)
	close(stop)
	wg.Wait()
	require.NoError(b.t, err)
	require.True(b.t, rep.OK(), "the seeded log breaks no invariant: %+v", rep.Violations)
	return d, rep, peak, live
}

// measure alternates the ceiling and Verify, rounds times, and prints
// medians and the ratio.
func (b benchEnv) measure() {
	var copies, verifies []time.Duration
	var peaks, lives []uint64
	var rep audit.Report
	for r := range b.rounds {
		c, rows := b.copyAll()
		v, got, peak, live := b.verify()
		rep = got
		copies, verifies, peaks, lives = append(copies, c), append(verifies, v), append(peaks, peak), append(lives, live)
		fmt.Printf("round %d: copy %s (%d rows), verify %s (%d events), verify heap peak %.1f MiB, live heap peak %.1f MiB\n",
			r+1, c.Round(time.Millisecond), rows, v.Round(time.Millisecond), got.Events, mib(peak), mib(live))
	}
	mc, mv := median(copies), median(verifies)
	slices.Sort(peaks)
	slices.Sort(lives)
	fmt.Printf("events %d, operations %d, open operations peak %d, open unknowns %d, page %d\n",
		rep.Events, rep.Operations, rep.OpenOperationsPeak, rep.OpenUnknownCount, b.page)
	fmt.Printf("median copy %s (%.0f events/s), median verify %s (%.0f events/s), verify/copy %.2fx\n",
		mc.Round(time.Millisecond), float64(rep.Events)/mc.Seconds(), mv.Round(time.Millisecond), float64(rep.Events)/mv.Seconds(),
		mv.Seconds()/mc.Seconds())
	fmt.Printf("verify heap peak median %.1f MiB (max %.1f), live heap peak median %.1f MiB (%.0f bytes per operation)\n",
		mib(peaks[len(peaks)/2]), mib(peaks[len(peaks)-1]), mib(lives[len(lives)/2]), float64(lives[len(lives)/2])/float64(rep.Operations))
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s", name)
	require.Positive(t, n, "%s", name)
	return n
}

// digestOnce times MakeDigest over the schema, then Verify without and
// with that digest.
func (b benchEnv) digestOnce() {
	store, err := postgres.Open(b.ctx, postgres.Config{URL: b.url, Schema: b.schema, MaxConns: 2})
	require.NoError(b.t, err)
	defer store.Close()
	start := time.Now()
	d, err := audit.MakeDigest(b.ctx, store, nil, digestSigner, time.Now())
	require.NoError(b.t, err)
	made := time.Since(start)
	plain, _, _, _ := b.verify()
	start = time.Now()
	rep, err := audit.Verify(b.ctx, store, audit.VerifyOptions{PageSize: b.page, AllowUnhashed: true, Digest: d, DigestKey: digestSigner.DigestVerifier})
	with := time.Since(start)
	require.NoError(b.t, err)
	require.True(b.t, rep.OK(), "the seeded log matches its digest: %+v", rep.Violations)
	fmt.Printf("digest-once: %d events; make digest %s (%.0f events/s), verify %s, verify with digest %s (%.2fx)\n",
		d.TreeSize, made.Round(time.Millisecond), float64(d.TreeSize)/made.Seconds(), plain.Round(time.Millisecond),
		with.Round(time.Millisecond), with.Seconds()/plain.Seconds())
}
