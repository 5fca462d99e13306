package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/harness"
	"opledger/adapters/harness/pgstack"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/audit"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres"
	"opledger/projections"
)

func init() {
	register("demo", "play the seed's Thursday/Friday refund story end to end, then three downloads of an export", runDemo)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("demo", "[--memory] [--keep] [--kafka] [flags]", stderr)
	f.Bind(settings.DatabaseURL, settings.Store, settings.KafkaBrokers)
	inMemory := f.Local().Bool("memory", false, "use the in-memory event store even when PostgreSQL is available")
	keep := f.Local().Bool("keep", false, "keep the demo's schemas for inspection and print the commands that read them (default: drop them at the end)")
	useKafka := f.Local().Bool("kafka", false, "carry the messages over Kafka at KAFKA_BROKERS instead of the Postgres-only transport")
	f.Note("PostgreSQL: a DATABASE_URL (or --database-url) that is given is used or the demo fails, naming it. Only when none is\n" +
		"given does it try " + postgres.RedactURL(settings.DefaultDatabaseURL) + ", then a private cluster from the system's\n" +
		"PostgreSQL binaries, then the in-memory store, saying what it tried. SIGINT, SIGTERM and a closed stdout\n" +
		"(| head) stop it and drop its schemas.")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, "demo", fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	if store := f.Text(settings.Store); store != "postgres" {
		return fail(stderr, "demo", f.Invalid(settings.Store, "the demo runs on the PostgreSQL store (or --memory) only: its closing "+
			"forgery edits the stored log with SQL; run the ledger on KurrentDB with 'opledger serve --store kurrent'"))
	}
	var brokers []string
	if *useKafka {
		if *inMemory {
			return fail(stderr, "demo", errors.New("--kafka and --memory do not go together: the transport needs PostgreSQL for its checkpoints"))
		}
		b, err := kafkaBrokers(f)
		if err == nil && b == nil {
			err = fmt.Errorf("--kafka needs KAFKA_BROKERS or --kafka-brokers (host:port,...)")
		}
		if err == nil {
			err = reachKafka(ctx, b)
		}
		if err != nil {
			return fail(stderr, "demo", err)
		}
		brokers = b
	} else if f.Given(settings.KafkaBrokers) && f.Source(settings.KafkaBrokers) == settings.FromFlag {
		return fail(stderr, "demo", errors.New("--kafka-brokers without --kafka: say --kafka to carry the messages over Kafka"))
	}

	// A closed stdout (demo | head) makes writes fail instead of killing the
	// process, so that the demo stops and drops its schemas.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopping := context.AfterFunc(ctx, func() { fmt.Fprintf(stderr, "opledger demo: %v: stopping and cleaning up\n", context.Cause(ctx)) })
	defer stopping() // registered after cancel: runs first, so a demo that ends by itself says nothing of stopping
	out := &demoOutput{w: stdout, cancel: cancel}

	code, err := demo(ctx, f, demoOptions{inMemory: *inMemory, keep: *keep, brokers: brokers}, out, newQuietLogger(stderr))
	cleaned := "dropped what it made"
	if *keep {
		cleaned = "its schemas stay (--keep)"
	}
	switch {
	case errors.Is(context.Cause(ctx), errStdoutClosed):
		fmt.Fprintf(stderr, "opledger demo: stdout was closed; stopped, and %s\n", cleaned)
		return 141 // as a death by SIGPIPE would say
	case ctx.Err() != nil:
		var sig signalled
		if !errors.As(context.Cause(ctx), &sig) {
			sig = signalled{os.Interrupt}
		}
		fmt.Fprintf(stderr, "opledger demo: %v; %s\n", sig, cleaned)
		return sig.exitCode()
	case err != nil:
		return fail(stderr, "demo", err)
	}
	return code
}

// demoOptions are the demo's own flags.
type demoOptions struct {
	inMemory, keep bool
	brokers        []string
}

// demo plays the story in the environment it opens and closes it (dropping
// its schemas unless kept) before it returns.
func demo(ctx context.Context, f *settings.Flags, o demoOptions, stdout io.Writer, log *slog.Logger) (int, error) {
	env, err := openDemoEnv(ctx, f, o, stdout, log)
	if err != nil {
		return 1, err
	}
	defer env.close()

	w, err := harness.New(harness.Options{Store: env.store, ClientAttempts: 1, Logger: log, Index: env.index(), SetAside: env.setAside()})
	if err != nil {
		return 1, err
	}
	defer w.Close()
	fmt.Fprintln(stdout, "== the story, as it happens")
	sum, err := harness.RunStory(ctx, w, stdout, env.courier())
	if err != nil {
		return 1, err
	}
	fmt.Fprintln(stdout, "\n== the second kind: three downloads of a generated export (authority of bounded use)")
	exports, err := harness.RunExportStory(ctx, w, stdout)
	if err != nil {
		return 1, err
	}
	if err := env.catchUp(ctx, stdout); err != nil {
		return 1, err
	}

	fmt.Fprintln(stdout, "\n== audit replay "+string(harness.StoryOperation)+" (straight from its stream)")
	rows, err := audit.Replay(ctx, env.store, harness.StoryOperation)
	if err != nil {
		return 1, err
	}
	if err := audit.WriteTimelineTable(stdout, harness.StoryOperation, rows, audit.DefaultTableWidth); err != nil {
		return 1, err
	}
	fmt.Fprintln(stdout, "\n== audit verify (every invariant over the whole log)")
	report, err := audit.Verify(ctx, env.store, audit.VerifyOptions{})
	if err != nil {
		return 1, err
	}
	if err := report.WriteText(stdout); err != nil {
		return 1, err
	}
	result := demoResult{Summary: sum, Invariants: "ok", Store: env.kind, ExportSummary: exports}
	if !report.OK() {
		var b strings.Builder
		_ = report.WriteText(&b)
		result.Invariants = b.String()
	}
	if result.ForgeryCaught, err = demoForgery(ctx, env, stdout); err != nil {
		return 1, err
	}
	env.printKept(stdout)
	fmt.Fprintln(stdout)
	line, _ := json.Marshal(result)
	fmt.Fprintln(stdout, string(line))
	if err := ctx.Err(); err != nil {
		return 1, err
	}
	if sum.RefundsCreated != 1 || exports.ExportsDelivered != exports.ExportUses || !report.OK() || !result.ForgeryCaught {
		return 1, nil
	}
	return 0, nil
}

// errStdoutClosed is the demo's cause of cancellation when its stdout
// is closed.
var errStdoutClosed = errors.New("stdout was closed")

// demoOutput is the demo's stdout: its first failed write (the reader went
// away: EPIPE) stops the demo, and the writes after it are dropped.
type demoOutput struct {
	w      io.Writer
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	failed bool
}

func (o *demoOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed {
		return len(p), nil
	}
	if _, err := o.w.Write(p); err != nil {
		o.failed = true
		o.cancel(errStdoutClosed)
	}
	return len(p), nil
}

// reachKafka fails, naming the brokers, unless one accepts a connection
// within kafkaDialTimeout: the demo would otherwise wait a minute for a
// message that cannot come.
func reachKafka(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaDialTimeout)
	defer cancel()
	if err := newBrokerProbe(brokers).probe(ctx); err != nil {
		return fmt.Errorf("--kafka: %w", err)
	}
	return nil
}

// kafkaDialTimeout bounds the demo's check that Kafka answers.
const kafkaDialTimeout = 3 * time.Second

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
	stack   *pgstack.Stack
	closers []func()
	// pool and the schemas are PostgreSQL's (nil and empty in memory).
	pool                *pgxpool.Pool
	storeSchema, rm, tr string
	kept                bool   // the schemas stay after the demo
	urlFlag             string // how the follow-up commands name the database ("" : their environment does)
	psqlURL             string // the database for psql (password redacted)
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

// openDemoEnv opens PostgreSQL: the given DATABASE_URL (or --database-url)
// or fails naming it; when none is given, the default local server, then a
// private cluster from the system's PostgreSQL binaries, then memory,
// saying what it tried.
func openDemoEnv(ctx context.Context, f *settings.Flags, o demoOptions, stdout io.Writer, log *slog.Logger) (*demoEnv, error) {
	if o.inMemory {
		fmt.Fprintln(stdout, "opledger demo: in-memory event store (asked for); projections and the transport are skipped")
		return &demoEnv{kind: "memory", store: memory.New(nil)}, nil
	}
	db := dbFrom(f)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	pool, err := db.pool(pctx)
	cancel()
	if f.Given(settings.DatabaseURL) { // asked for: used, or an error; never a fallback
		if err != nil {
			return nil, fmt.Errorf("%w (the demo uses a given database or none: unset DATABASE_URL to let it find or start one, or run --memory)", err)
		}
		env, err := postgresDemoEnv(ctx, pool, postgres.RedactURL(db.url), o.keep, o.brokers, stdout, log)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("PostgreSQL at %s: %w", db.where(), err)
		}
		if f.Source(settings.DatabaseURL) == settings.FromFlag {
			env.urlFlag = " --database-url '" + postgres.RedactURL(db.url) + "'"
		}
		env.psqlURL = postgres.RedactURL(db.url)
		return env, nil
	}
	var tried []string
	if err == nil {
		env, err := postgresDemoEnv(ctx, pool, postgres.RedactURL(db.url), o.keep, o.brokers, stdout, log)
		if err == nil {
			env.psqlURL = postgres.RedactURL(db.url)
			return env, nil
		}
		pool.Close()
		tried = append(tried, fmt.Sprintf("%s: %v", postgres.RedactURL(db.url), err))
	} else {
		tried = append(tried, err.Error())
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
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
			where := "a private cluster in " + cluster.dir + " (removed at the end)"
			if o.keep {
				fmt.Fprintln(stdout, "opledger demo: --keep: nothing can be kept on the private cluster, which is removed at the end")
			}
			env, err := postgresDemoEnv(ctx, pool, where, false, o.brokers, stdout, log)
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
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	tried = append(tried, fmt.Sprintf("a private cluster from the system's PostgreSQL binaries: %v", err))
	fmt.Fprintf(stdout, "opledger demo: no PostgreSQL could be used; tried:\n  - %s\nRunning the same story on the in-memory event store: projections and the transport are skipped.\n",
		strings.Join(tried, "\n  - "))
	return &demoEnv{kind: "memory", store: memory.New(nil)}, nil
}

func postgresDemoEnv(ctx context.Context, pool *pgxpool.Pool, where string, keep bool, brokers []string, stdout io.Writer, log *slog.Logger) (*demoEnv, error) {
	base := fmt.Sprintf("opledger_demo_%d_%d_%d", time.Now().Unix(), os.Getpid(), demoSeq.Add(1))
	es, rm, tr := base+"_store", base, base+"_transport"
	env := &demoEnv{kind: "postgres", closers: []func(){pool.Close}, pool: pool, storeSchema: es, rm: rm, tr: tr, kept: keep}
	if !keep { // registered first: whatever fails below, nothing is left behind
		env.closers = append(env.closers, func() {
			_, _ = pool.Exec(context.Background(), fmt.Sprintf("DROP SCHEMA IF EXISTS %s CASCADE; DROP SCHEMA IF EXISTS %s CASCADE; DROP SCHEMA IF EXISTS %s CASCADE", es, rm, tr))
		})
	}
	if _, err := postgres.Migrate(ctx, pool, es); err != nil {
		env.closeSchemas()
		return nil, err
	}
	store, err := postgres.New(pool, es)
	if err != nil {
		env.closeSchemas()
		return nil, err
	}
	env.store = store
	stack, err := pgstack.Start(ctx, pool, store, pgstack.Options{ViewSchema: rm, TransportSchema: tr, KafkaBrokers: brokers, Logger: log})
	if err != nil {
		env.closeSchemas()
		return nil, err
	}
	env.stack = stack
	env.closers = append(env.closers, func() { _ = stack.Stop() })
	kept := "dropped at the end; --keep keeps them"
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

// closeSchemas drops what an env that failed to open made, without closing
// its pool (the caller still owns it then).
func (e *demoEnv) closeSchemas() {
	for i := len(e.closers) - 1; i >= 1; i-- { // closers[0] closes the pool
		e.closers[i]()
	}
	e.closers = e.closers[:1]
}

// maxCatchUp bounds the wait for the projector at the end of the story; the
// story appends a handful of events, which it folds within milliseconds.
const maxCatchUp = 30 * time.Second

// catchUp waits until the projector has folded every event of the demo's
// store (the demo is its only writer), so that the read models (and SQL on
// them, with --keep) hold the whole story, Friday's refused copy included.
// It counts the stored events rather than asking the store's head: the head
// stops below any transaction open anywhere on the server, and may not yet
// show the story's last events.
func (e *demoEnv) catchUp(ctx context.Context, stdout io.Writer) error {
	if e.stack == nil {
		return nil
	}
	var stored int64
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{e.storeSchema, "events"}.Sanitize()).Scan(&stored); err != nil {
		return fmt.Errorf("count the demo's events: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, maxCatchUp)
	defer cancel()
	for { // bounded by maxCatchUp
		cp, err := projections.ReadCheckpoint(ctx, e.pool, e.store, e.rm, "")
		if err == nil && cp.EventsApplied >= stored {
			fmt.Fprintf(stdout, "\nthe read models have caught up: %d events folded, through position %s\n", cp.EventsApplied, cp.Text)
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && err == nil {
				return fmt.Errorf("the projector did not catch up within %s: %d of %d events folded", maxCatchUp, cp.EventsApplied, stored)
			}
			return errors.Join(ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// printKept prints, with --keep, the commands that read what the demo kept,
// with the flags that find it.
func (e *demoEnv) printKept(stdout io.Writer) {
	if !e.kept || e.pool == nil {
		return
	}
	op := string(harness.StoryOperation)
	sql := func(q string) string { return "  psql '" + e.psqlURL + "' -c '" + q + "'" }
	fmt.Fprintf(stdout, "\n== kept (--keep): the demo's schemas stay; read them again with\n")
	fmt.Fprintf(stdout, "  opledger audit replay %s --store-schema %s%s\n", op, e.storeSchema, e.urlFlag)
	fmt.Fprintf(stdout, "  opledger audit verify --store-schema %s%s\n", e.storeSchema, e.urlFlag)
	fmt.Fprintln(stdout, "    (verify exits 1: the demonstration's forgery is in this log, on purpose)")
	fmt.Fprintln(stdout, sql("SELECT kind, reason, message_id, capability_id FROM "+e.rm+".evidence ORDER BY event_seq"))
	fmt.Fprintln(stdout, sql("SELECT id, state, attempt FROM "+e.rm+".operations"))
	fmt.Fprintf(stdout, "  opledger projections list --schema %s%s\n", e.rm, e.urlFlag)
	if strings.Contains(e.psqlURL, "xxxxx") {
		fmt.Fprintln(stdout, "  (the password is shown as xxxxx: put yours back)")
	}
	fmt.Fprintln(stdout, "and drop them with")
	fmt.Fprintln(stdout, sql(fmt.Sprintf("DROP SCHEMA %s CASCADE; DROP SCHEMA %s CASCADE; DROP SCHEMA %s CASCADE", e.storeSchema, e.rm, e.tr)))
}
