package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore/postgres"
	"opledger/projections"
)

func init() {
	groups = append(groups, group{
		title: "the log: projector and audit verify",
		names: []string{"projector_catchup", "projector_write_floor", "audit_verify", "audit_verify_rss", "audit_verify_digest"},
		run:   runLog,
	})
}

// logSchema holds the log the projector and verify read.
const logSchema = "bench_log"

// writeLogTemplate writes ops operations' histories through the command
// handler, a mix of what a log holds: completions, duplicates and replays,
// lease renewals, NotApplied then a second attempt, Unknowns reconciled or
// escalated and resolved.
func writeLogTemplate(ctx context.Context, store *postgres.Store, ops int) error {
	c := clock.NewManual(benchStart)
	h, err := ledger.New(ledger.Config{Store: store, Clock: c, Logger: quietLogger()})
	if err != nil {
		return err
	}
	by := ledger.Cause{Actor: "bench"}
	for i := range ops {
		op := domain.OperationID(fmt.Sprintf("OP-%04d", i))
		msg := func(k int) domain.MessageID { return domain.MessageID(fmt.Sprintf("MSG-%04d-%d", i, k)) }
		if _, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: fmt.Sprintf("ORD-%04d", i),
			AmountMinor: int64(1000 + i), Currency: "EUR", OrderTotalMinor: 100_000, CorrelationID: domain.CorrelationID(fmt.Sprintf("COR-%04d", i))}, by); err != nil {
			return err
		}
		decide := domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: domain.Facts{OrderRefundable: true}}
		_, issued, err := h.DecideAndIssue(ctx, op, decide, domain.IssueCapability{}, by)
		if err != nil {
			return err
		}
		out, err := h.Claim(ctx, op, domain.Claim{MessageID: msg(1), CapabilityID: issued.CapabilityID, WorkerID: "worker-a"})
		if err != nil {
			return err
		}
		x, secret := out.ExecutionID, out.LeaseSecret
		record := func(o domain.Outcome, ref string) error {
			return h.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: secret, Outcome: o, ProviderReference: ref}, by)
		}
		switch i % 6 {
		case 0, 5: // renewed, completed; then a duplicate and a replay
			if _, err := h.RenewLease(ctx, op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: secret}, by); err != nil {
				return err
			}
			if err := record(domain.Completed, "re_"+string(op)); err != nil {
				return err
			}
			if _, err := h.Claim(ctx, op, domain.Claim{MessageID: msg(1), CapabilityID: issued.CapabilityID, WorkerID: "worker-b"}); err != nil {
				return err
			}
			if _, err := h.Claim(ctx, op, domain.Claim{MessageID: msg(2), CapabilityID: issued.CapabilityID, WorkerID: "worker-c"}); err != nil {
				return err
			}
		case 1: // Unknown, reconciled
			if err := record(domain.Unknown, ""); err != nil {
				return err
			}
			if err := h.Reconcile(ctx, op, domain.Reconcile{ExecutionID: x, Outcome: domain.Completed, Method: domain.MethodProviderLookup, ProviderReference: "re_" + string(op)}, by); err != nil {
				return err
			}
		case 2: // NotApplied, then a second attempt that completes
			if err := record(domain.NotApplied, ""); err != nil {
				return err
			}
			_, issued, err = h.DecideAndIssue(ctx, op, decide, domain.IssueCapability{}, by)
			if err != nil {
				return err
			}
			out, err = h.Claim(ctx, op, domain.Claim{MessageID: msg(3), CapabilityID: issued.CapabilityID, WorkerID: "worker-a"})
			if err != nil {
				return err
			}
			x, secret = out.ExecutionID, out.LeaseSecret
			if err := record(domain.Completed, "re_"+string(op)); err != nil {
				return err
			}
		case 3: // Unknown, escalated, resolved by an operator
			if err := record(domain.Unknown, ""); err != nil {
				return err
			}
			if err := h.Escalate(ctx, op, domain.Escalate{ExecutionID: x, Reason: "lookup inconclusive"}, by); err != nil {
				return err
			}
			if err := h.Reconcile(ctx, op, domain.Reconcile{ExecutionID: x, Outcome: domain.NotApplied, Method: domain.MethodOperator, Actor: "ops-1", Evidence: "provider dashboard"}, by); err != nil {
				return err
			}
		case 4: // completed
			if err := record(domain.Completed, "re_"+string(op)); err != nil {
				return err
			}
		}
	}
	return nil
}

// replicateLogSQL copies the template's events (global_position <= $1)
// once per k in [$2, $3], every identifier prefixed with k- (streams, ids
// in data and metadata; fresh event ids), at most $4 rows. The copies carry
// no hashes: stored as if before hashing began.
const replicateLogSQL = `INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata)
SELECT regexp_replace(t.stream_id, '(OP)-', '\1-' || k || '-'), t.stream_version, gen_random_uuid(), t.event_type,
       regexp_replace(t.data::text, '(OP|EXE|CAP|DEC|MSG|COR)-', '\1-' || k || '-', 'g')::jsonb,
       regexp_replace(t.metadata::text, '(OP|EXE|CAP|DEC|MSG|COR)-', '\1-' || k || '-', 'g')::jsonb
FROM generate_series($2::bigint, $3::bigint) AS k, %[1]s.events t
WHERE t.global_position <= $1
ORDER BY k, t.global_position
LIMIT $4`

// seedLog writes a log of about n events into logSchema and returns its
// exact size once every event is readable.
func seedLog(ctx context.Context, s *settings, pool *pgxpool.Pool, n int) (int, error) {
	store, err := openStore(ctx, s, logSchema, 4)
	if err != nil {
		return 0, err
	}
	defer store.Close()
	if err := writeLogTemplate(ctx, store, 60); err != nil {
		return 0, fmt.Errorf("template: %w", err)
	}
	ident := pgx.Identifier{logSchema}.Sanitize()
	var last, have int64
	if err := pool.QueryRow(ctx, `SELECT max(global_position), count(*) FROM `+ident+`.events`).Scan(&last, &have); err != nil {
		return 0, err
	}
	perCopy := have
	sql := fmt.Sprintf(replicateLogSQL, ident)
	for k := int64(1); have < int64(n); {
		copies := max(1, 100_000/perCopy) // about 100,000 rows per transaction
		tag, err := pool.Exec(ctx, sql, last, k, k+copies-1, int64(n)-have)
		if err != nil {
			return 0, fmt.Errorf("replicate: %w", err)
		}
		have += tag.RowsAffected()
		k += copies
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+ident+`.streams (stream_id, version)
SELECT stream_id, max(stream_version) FROM `+ident+`.events GROUP BY stream_id
ON CONFLICT (stream_id) DO NOTHING`); err != nil {
		return 0, err
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE `+ident+`.events`); err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(2 * time.Minute); ; { // bounded: an open transaction elsewhere holds readers back
		head, err := store.Head(ctx)
		if err != nil {
			return 0, err
		}
		var lastPos postgres.Position
		if err := pool.QueryRow(ctx, `SELECT transaction_id, global_position FROM `+ident+`.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1`).
			Scan(&lastPos.TransactionID, &lastPos.GlobalPosition); err != nil {
			return 0, err
		}
		if head.Compare(lastPos) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the log's end never became readable: a transaction stays open on the server")
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, bounded
	}
	return int(have), nil
}

// copySeconds reads the whole log, every column, in log order, with
// COPY ... TO STDOUT: the ceiling of any reader of the log.
func copySeconds(ctx context.Context, pool *pgxpool.Pool, n int) (float64, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	sql := `COPY (SELECT global_position, transaction_id, stream_id, stream_version, event_id, event_type, data, metadata, recorded_at, prev_hash, event_hash
FROM ` + pgx.Identifier{logSchema}.Sanitize() + `.events ORDER BY transaction_id, global_position) TO STDOUT`
	start := time.Now()
	tag, err := conn.Conn().PgConn().CopyTo(ctx, io.Discard, sql)
	if err != nil {
		return 0, err
	}
	if tag.RowsAffected() != int64(n) {
		return 0, fmt.Errorf("copy read %d rows, want %d", tag.RowsAffected(), n)
	}
	return time.Since(start).Seconds(), nil
}

// perRound turns a timing of n events (seconds, given the round's number
// from 1) into a sampler of events per second.
func perRound(n int, seconds func(ctx context.Context, round int) (float64, error)) func(context.Context) (float64, error) {
	round := 0
	return func(ctx context.Context) (float64, error) {
		round++
		secs, err := seconds(ctx, round)
		return float64(n) / secs, err
	}
}

// projectorSeconds catches a projector up on the whole log into a fresh
// read-model schema.
func projectorSeconds(ctx context.Context, pool *pgxpool.Pool, store *postgres.Store, n, round int) (float64, error) {
	schema := fmt.Sprintf("bench_projection_%d", round)
	if _, err := projections.Migrate(ctx, pool, schema); err != nil {
		return 0, err
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: schema, Logger: quietLogger()})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	applied, err := p.CatchUp(ctx)
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if applied != int64(n) {
		return 0, fmt.Errorf("the projector applied %d of %d events", applied, n)
	}
	return d.Seconds(), nil
}

// verifyResult is what `bench verify` prints.
type verifyResult struct {
	Seconds   float64 `json:"seconds"`
	Events    int64   `json:"events"`
	MaxRSSKiB int64   `json:"max_rss_kib"`
	Clean     bool    `json:"clean"`
}

// verifyOnce runs audit verify over the log in a process of its own, for
// its time and its peak memory; digest, when not empty, is a digest file
// the log must match (signed with benchDigestSigner).
func verifyOnce(ctx context.Context, s *settings, digest string) (verifyResult, error) {
	self, err := os.Executable()
	if err != nil {
		return verifyResult{}, err
	}
	args := []string{"verify", "--schema", logSchema}
	if digest != "" {
		args = append(args, "--digest", digest)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+s.url)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		return verifyResult{}, fmt.Errorf("bench verify: %w: %s", err, lastLines(errs.String(), 3))
	}
	var r verifyResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return verifyResult{}, fmt.Errorf("bench verify printed %q: %w", out.String(), err)
	}
	return r, nil
}

// benchDigestSigner signs the digest audit_verify_digest verifies against:
// a fixed key, as the figure needs no secret.
func benchDigestSigner() *audit.DigestSigner {
	s, err := audit.NewDigestSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		panic(err) // a 32-byte seed is always accepted
	}
	return s
}

// writeBenchDigest signs a digest of the whole log into a file of dir.
func writeBenchDigest(ctx context.Context, store *postgres.Store, dir string) (string, error) {
	d, err := audit.MakeDigest(ctx, store, nil, benchDigestSigner(), benchStart)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "bench-digest.json")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := d.WriteJSON(f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// verifySubcommand is `bench verify --schema S [--digest FILE]`:
// audit.Verify over the log, printing a verifyResult.
func verifySubcommand(args []string) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	schema := fs.String("schema", logSchema, "the event store schema")
	digestFile := fs.String("digest", "", "a digest the log must match (signed by the bench's key)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opts := audit.VerifyOptions{AllowUnhashed: true}
	if *digestFile != "" {
		f, err := os.Open(*digestFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench verify:", err)
			return 1
		}
		d, err := audit.ParseDigest(f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench verify:", err)
			return 1
		}
		opts.Digest, opts.DigestKey = d, benchDigestSigner().DigestVerifier
	}
	ctx := context.Background()
	store, err := postgres.Open(ctx, postgres.Config{URL: os.Getenv("DATABASE_URL"), Schema: *schema, MaxConns: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench verify:", err)
		return 1
	}
	defer store.Close()
	start := time.Now()
	report, err := audit.Verify(ctx, store, opts)
	d := time.Since(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench verify:", err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(verifyResult{Seconds: d.Seconds(), Events: report.Events, MaxRSSKiB: peakRSSKiB(), Clean: len(report.Violations) == 0})
	return 0
}

// peakRSSKiB is this process's peak resident memory since it was executed:
// /proc/self/status's VmHWM. getrusage's ru_maxrss is not: Linux carries
// into it, at exec, the peak of the process that forked this one, so a
// verify started by a bench process holding 400 MiB reported 400 MiB
// whatever it used itself. Where /proc is not, ru_maxrss it is.
func peakRSSKiB() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					return kib
				}
			}
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss
}

func runLog(ctx context.Context, s *settings, emit func(figure)) error {
	pool, err := openPool(ctx, s, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	t0 := time.Now()
	n, err := seedLog(ctx, s, pool, s.logSize)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: seeded a log of %d events in %s\n", n, time.Since(t0).Round(100*time.Millisecond))
	store, err := openStore(ctx, s, logSchema, 4)
	if err != nil {
		return err
	}
	defer store.Close()
	size := "1m"
	if n < 1_000_000 {
		size = strconv.Itoa(n/1000) + "k"
	}
	copyRate := perRound(n, func(ctx context.Context, _ int) (float64, error) { return copySeconds(ctx, pool, n) })
	if s.wants("projector_catchup") {
		ours, base, err := interleave(ctx, s.rounds, perRound(n, func(ctx context.Context, round int) (float64, error) {
			return projectorSeconds(ctx, pool, store, n, round)
		}), copyRate)
		if err != nil {
			return fmt.Errorf("projector_catchup: %w", err)
		}
		f := rateFigure("projector_catchup", "events/s", "COPY TO STDOUT", "ratio >= 0.5", ours, base)
		f.note = fmt.Sprintf("a log of %d events (%s), from the start into fresh read models", n, size)
		emit(f)
	}
	if s.wants("projector_write_floor") {
		rows, err := projectRows(ctx, pool, store, n)
		if err != nil {
			return fmt.Errorf("projector_write_floor: %w", err)
		}
		ours, base, err := interleave(ctx, s.rounds, perRound(n, func(ctx context.Context, round int) (float64, error) {
			return writeRowsSeconds(ctx, pool, rows, round)
		}), copyRate)
		if err != nil {
			return fmt.Errorf("projector_write_floor: %w", err)
		}
		f := rateFigure("projector_write_floor", "events/s", "COPY TO STDOUT", "", ours, base)
		f.note = fmt.Sprintf("the rows a catch-up of the log of %d events (%s) leaves in the read models, written into fresh ones at once, one binary COPY per table in one transaction, every index kept: "+
			"the least the catch-up's writes cost, before the log is read or an event decoded (a catch-up at this rate would have to read and fold for free)", n, size)
		emit(f)
	}
	if s.wants("audit_verify") {
		var rss []float64
		var clean = true
		ours, base, err := interleave(ctx, s.rounds,
			func(ctx context.Context) (float64, error) {
				r, err := verifyOnce(ctx, s, "")
				if err == nil && r.Events != int64(n) {
					err = fmt.Errorf("verify read %d of %d events", r.Events, n)
				}
				rss = append(rss, float64(r.MaxRSSKiB)/1024)
				clean = clean && r.Clean
				return r.Seconds, err
			},
			func(ctx context.Context) (float64, error) { return copySeconds(ctx, pool, n) })
		if err != nil {
			return fmt.Errorf("audit_verify: %w", err)
		}
		f := figure{Figure: "audit_verify", Value: round(median(ours)), Unit: "s", Baseline: "COPY TO STDOUT", BaselineValue: round(median(base)),
			Ratio: round3(median(base) / median(ours)), Goal: "ratio >= 0.6", spread: spread(ours) + " / " + spread(base)}
		f.note = fmt.Sprintf("a log of %d events (%s); ratio = COPY's time / verify's; the log verified clean: %v", n, size, clean)
		emit(f)
		m := figure{Figure: "audit_verify_rss", Value: round(median(rss)), Unit: "MiB", Goal: "value <= 256", spread: spread(rss)}
		m.note = "the verify process's peak resident memory"
		emit(m)
	}
	if s.wants("audit_verify_digest") {
		dir, err := os.MkdirTemp("", "bench-digest-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		digest, err := writeBenchDigest(ctx, store, dir)
		if err != nil {
			return fmt.Errorf("audit_verify_digest: %w", err)
		}
		timed := func(digest string) func(ctx context.Context) (float64, error) {
			return func(ctx context.Context) (float64, error) {
				r, err := verifyOnce(ctx, s, digest)
				if err == nil && (r.Events != int64(n) || !r.Clean) {
					err = fmt.Errorf("verify read %d of %d events, clean: %v", r.Events, n, r.Clean)
				}
				return r.Seconds, err
			}
		}
		ours, base, err := interleave(ctx, s.rounds, timed(digest), timed(""))
		if err != nil {
			return fmt.Errorf("audit_verify_digest: %w", err)
		}
		f := figure{Figure: "audit_verify_digest", Value: round(median(ours)), Unit: "s", Baseline: "audit verify without a digest", BaselineValue: round(median(base)),
			Ratio: round3(median(base) / median(ours)), spread: spread(ours) + " / " + spread(base)}
		f.note = fmt.Sprintf("a log of %d events (%s) checked against a signed digest of all of it (the Merkle tree rebuilt and compared); ratio = without / with", n, size)
		emit(f)
	}
	return nil
}
