package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/harness"
	"opledger/adapters/kafka"
	"opledger/domain/audit"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres"
)

func init() {
	register("demo", "play the seed's Thursday/Friday refund story end to end, then three downloads of an export", runDemo)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("demo", "[--database-url URL] [--memory] [--keep] [--kafka]", stderr)
	db := dbFlags(fs)
	inMemory := fs.Bool("memory", false, "use the in-memory event store even when PostgreSQL is available")
	keep := fs.Bool("keep", false, "keep the demo's schemas for inspection (default: drop them at the end)")
	useKafka := fs.Bool("kafka", false, "carry the messages over Kafka at KAFKA_BROKERS instead of the Postgres-only transport")
	brokerList := fs.String("kafka-brokers", env("KAFKA_BROKERS", ""), "Kafka brokers for --kafka [KAFKA_BROKERS]")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	var brokers []string
	if *useKafka {
		if *inMemory {
			return fail(stderr, "demo", errors.New("--kafka and --memory do not go together: the transport needs PostgreSQL for its checkpoints"))
		}
		b, err := kafka.ParseBrokers(*brokerList)
		if err != nil || len(b) == 0 {
			return fail(stderr, "demo", fmt.Errorf("--kafka needs KAFKA_BROKERS or --kafka-brokers (host:port,...): %q", *brokerList))
		}
		brokers = b
	}
	log := newQuietLogger(stderr)
	env, err := openDemoEnv(ctx, db, *inMemory, *keep, brokers, stdout, log)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer env.close()

	w, err := harness.New(harness.Options{Store: env.store, ClientAttempts: 1, Logger: log, Index: env.index(), SetAside: env.setAside()})
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer w.Close()
	fmt.Fprintln(stdout, "== the story, as it happens")
	sum, err := harness.RunStory(ctx, w, stdout, env.courier())
	if err != nil {
		return fail(stderr, "demo", err)
	}
	fmt.Fprintln(stdout, "\n== the second kind: three downloads of a generated export (authority of bounded use)")
	exports, err := harness.RunExportStory(ctx, w, stdout)
	if err != nil {
		return fail(stderr, "demo", err)
	}

	fmt.Fprintln(stdout, "\n== audit replay "+string(harness.StoryOperation)+" (straight from its stream)")
	rows, err := audit.Replay(ctx, env.store, harness.StoryOperation)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if err := audit.WriteTimelineTable(stdout, harness.StoryOperation, rows, audit.DefaultTableWidth); err != nil {
		return fail(stderr, "demo", err)
	}
	fmt.Fprintln(stdout, "\n== audit verify (every invariant over the whole log)")
	report, err := audit.Verify(ctx, env.store, audit.VerifyOptions{})
	if err != nil {
		return fail(stderr, "demo", err)
	}
	if err := report.WriteText(stdout); err != nil {
		return fail(stderr, "demo", err)
	}
	result := demoResult{Summary: sum, Invariants: "ok", Store: env.kind, ExportSummary: exports}
	if !report.OK() {
		var b strings.Builder
		_ = report.WriteText(&b)
		result.Invariants = b.String()
	}
	if result.ForgeryCaught, err = demoForgery(ctx, env, stdout); err != nil {
		return fail(stderr, "demo", err)
	}
	fmt.Fprintln(stdout)
	line, _ := json.Marshal(result)
	fmt.Fprintln(stdout, string(line))
	if sum.RefundsCreated != 1 || exports.ExportsDelivered != exports.ExportUses || !report.OK() || !result.ForgeryCaught {
		return 1
	}
	return 0
}

// demoSeq tells apart demos started by one process in one second.
var demoSeq atomic.Int64

// demoResult is the demo's last line.
type demoResult struct {
	harness.Summary
	Invariants string `json:"invariants"`
	Store      string `json:"store"`
	// ForgeryCaught: the closing demonstration's forgery was caught by
	// verify with the digest and without.
	ForgeryCaught bool `json:"forgery_caught"`
	// The second kind's figures, after the refund's (fields added at the
	// end of the line: export_uses, exports_delivered, export_keys, ...).
	harness.ExportSummary
}

// demoEnv is where the demo runs: PostgreSQL with serve's roles (projector,
// relay, Postgres-only transport), or the in-memory store.
type demoEnv struct {
	kind    string
	store   eventstore.Store
	stack   *harness.Stack
	closers []func()
	// pool and storeSchema are the PostgreSQL store's, for the closing
	// forgery (nil in memory).
	pool        *pgxpool.Pool
	storeSchema string
}

// index is where the sweeper and reconciler find candidates: the read
// models on PostgreSQL, nil (the harness's in-memory log index) otherwise.
func (e *demoEnv) index() recovery.Index {
	if e.stack == nil {
		return nil
	}
	return e.stack.Index
}

// setAside keeps the roles' failing items: the transport schema's table on
// PostgreSQL, nil (the harness's in-memory store) otherwise.
func (e *demoEnv) setAside() setaside.Store {
	if e.stack == nil {
		return nil
	}
	return e.stack.SetAside
}

func (e *demoEnv) courier() harness.Courier {
	if e.stack == nil {
		return harness.DirectCourier{}
	}
	return e.stack.Courier
}

func (e *demoEnv) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// openDemoEnv tries DATABASE_URL (or the default local server), then a
// private cluster from the system's PostgreSQL binaries, then memory; it
// says what it tried.
func openDemoEnv(ctx context.Context, db *dbConfig, inMemory, keep bool, brokers []string, stdout io.Writer, log *slog.Logger) (*demoEnv, error) {
	if inMemory {
		fmt.Fprintln(stdout, "opledger demo: in-memory event store (asked for); projections and the transport are skipped")
		return &demoEnv{kind: "memory", store: memory.New(nil)}, nil
	}
	var tried []string
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	pool, err := db.pool(pctx)
	cancel()
	if err == nil {
		env, err := postgresDemoEnv(ctx, pool, postgres.RedactURL(db.url), keep, brokers, stdout, log)
		if err == nil {
			return env, nil
		}
		pool.Close()
		tried = append(tried, fmt.Sprintf("%s: %v", postgres.RedactURL(db.url), err))
	} else {
		tried = append(tried, fmt.Sprintf("%s: %v", postgres.RedactURL(db.url), err))
	}
	cluster, err := startPrivateCluster(ctx)
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pool, err = pgxpool.New(pctx, cluster.url)
		if err == nil {
			err = pool.Ping(pctx)
		}
		cancel()
		if err == nil {
			env, err := postgresDemoEnv(ctx, pool, "a private cluster in "+cluster.dir+" (removed at the end)", true, brokers, stdout, log)
			if err == nil {
				env.closers = append([]func(){cluster.stop}, env.closers...)
				return env, nil
			}
		}
		if pool != nil {
			pool.Close()
		}
		cluster.stop()
	}
	tried = append(tried, fmt.Sprintf("a private cluster from the system's PostgreSQL binaries: %v", err))
	fmt.Fprintf(stdout, "opledger demo: no PostgreSQL could be used; tried:\n  - %s\nRunning the same story on the in-memory event store: projections and the transport are skipped.\n",
		strings.Join(tried, "\n  - "))
	return &demoEnv{kind: "memory", store: memory.New(nil)}, nil
}

func postgresDemoEnv(ctx context.Context, pool *pgxpool.Pool, where string, keep bool, brokers []string, stdout io.Writer, log *slog.Logger) (*demoEnv, error) {
	base := fmt.Sprintf("opledger_demo_%d_%d_%d", time.Now().Unix(), os.Getpid(), demoSeq.Add(1))
	es, rm, tr := base+"_store", base, base+"_transport"
	if _, err := postgres.Migrate(ctx, pool, es); err != nil {
		return nil, err
	}
	store, err := postgres.New(pool, es)
	if err != nil {
		return nil, err
	}
	env := &demoEnv{kind: "postgres", store: store, closers: []func(){pool.Close}, pool: pool, storeSchema: es}
	if !keep {
		env.closers = append(env.closers, func() {
			_, _ = pool.Exec(context.Background(), fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE; DROP SCHEMA IF EXISTS %s CASCADE; DROP SCHEMA IF EXISTS %s CASCADE", es, rm, tr))
		})
	}
	stack, err := harness.StartPostgresStack(ctx, pool, store, harness.StackOptions{ViewSchema: rm, TransportSchema: tr, KafkaBrokers: brokers, Logger: log})
	if err != nil {
		env.close()
		return nil, err
	}
	env.stack = stack
	env.closers = append(env.closers, func() { _ = stack.Stop() })
	kept := "dropped at the end (--keep keeps them)"
	switch {
	case strings.HasPrefix(where, "a private cluster"):
		kept = "gone with the cluster"
	case keep:
		kept = "kept for inspection"
	}
	carrier := "the Postgres-only transport"
	if len(brokers) > 0 {
		carrier = "Kafka at " + strings.Join(brokers, ",") + " (a consumer group)"
	}
	fmt.Fprintf(stdout, "opledger demo: PostgreSQL at %s; event store %s, read models %s, transport tables %s (%s)\n"+
		"  serve's roles run here: the projector, the relay into %s, the sweeper and reconciler on the read models\n\n",
		where, es, rm, tr, kept, carrier)
	return env, nil
}
