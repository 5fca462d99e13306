package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/harness"
	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/provider"
	"opledger/adapters/roles"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

func init() {
	groups = append(groups, group{
		title: "end to end",
		names: []string{"e2e_pgqueue", "e2e_kafka", "statements_per_refund_pgqueue", "commits_per_refund_pgqueue", "e2e_pgqueue_vs_river", "e2e_kafka_vs_river", "e2e_alone_vs_river"},
		run:   runEndToEnd,
	})
}

// debug is BENCH_DEBUG: print, for each end-to-end sample, its statements
// by kind, the relays' progress and where its time went (sampleWatch).
var debug = os.Getenv("BENCH_DEBUG") != ""

// e2eConcurrency is the messages in flight on every path: the Postgres
// queue's default, as many Kafka partitions, as many goroutines for the
// worker alone.
const e2eConcurrency = pgqueue.DefaultConcurrency

// statementCounter counts the statements sent on the pools it traces, and
// among them the commits: statements that write outside an explicit
// transaction (each is its own transaction), and COMMITs. Each statement's
// text is classified once (the texts are the stores' constants), so that
// counting costs the figures it counts next to nothing; by kind only under
// BENCH_DEBUG.
type statementCounter struct {
	statements, commits atomic.Int64
	classes             sync.Map // SQL text -> statementClass
	mu                  sync.Mutex
	kinds               map[string]int
}

// statementClass is what the counter knows of one statement text.
type statementClass struct {
	commit bool
	kind   string // the text's first 60 characters, spaces folded
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.statements.Add(1)
	v, ok := c.classes.Load(d.SQL)
	if !ok {
		sql := strings.ToUpper(d.SQL)
		k := strings.Join(strings.Fields(d.SQL), " ")
		v, _ = c.classes.LoadOrStore(d.SQL, statementClass{kind: k[:min(len(k), 60)],
			commit: strings.HasPrefix(strings.TrimSpace(sql), "COMMIT") || strings.Contains(sql, "INSERT ") || strings.Contains(sql, "UPDATE ") || strings.Contains(sql, "DELETE ")})
	}
	class := v.(statementClass)
	if class.commit {
		c.commits.Add(1)
	}
	if debug {
		c.mu.Lock()
		if c.kinds == nil {
			c.kinds = map[string]int{}
		}
		c.kinds[class.kind]++
		c.mu.Unlock()
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) reset() {
	c.statements.Store(0)
	c.commits.Store(0)
	c.mu.Lock()
	c.kinds = nil
	c.mu.Unlock()
}

// e2eWorld is the system of the end-to-end figures: serve's side (the
// ledger that approves refunds, the log the relay reads) and a worker
// process's side (its own store and ledger, so its cache starts cold for
// each refund, as in a deployment), the provider simulator over HTTP with
// no latency (a process of its own, started fresh for every sample:
// withSim), the transport schema.
type e2eWorld struct {
	world       *harness.World
	apiStore    *postgres.Store
	workerStore *postgres.Store
	tpool       *pgxpool.Pool
	tschema     string
	counter     *statementCounter
	pools       []*pgxpool.Pool
	workerLg    *ledger.Handler
	dispatcher  *transport.Dispatcher // the current sample's (withSim)
	checks      *pgstate.Checkpoints
	seq         atomic.Int64
	watch       atomic.Pointer[sampleWatch] // the current sample's, under BENCH_DEBUG
}

// startWatch starts watching a sample under BENCH_DEBUG (sampleWatch).
func (w *e2eWorld) startWatch(ctx context.Context) {
	if debug {
		w.watch.Store(watchSample(ctx, w.tpool))
	}
}

func newE2EWorld(ctx context.Context, s *settings) (*e2eWorld, error) {
	w := &e2eWorld{counter: &statementCounter{}, tschema: "bench_e2e_transport"}
	tracedPool := func(maxConns int32, app string) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(s.url)
		if err != nil {
			return nil, err
		}
		cfg.MaxConns = maxConns
		cfg.ConnConfig.Tracer = w.counter
		cfg.ConnConfig.RuntimeParams["application_name"] = app
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			w.pools = append(w.pools, p)
		}
		return p, err
	}
	const schema = "bench_e2e_store"
	admin, err := openStore(ctx, s, schema, 2) // migrates
	if err != nil {
		return nil, err
	}
	admin.Close()
	apiPool, err := tracedPool(10, "api")
	if err != nil {
		return nil, err
	}
	workerPool, err := tracedPool(10, "worker")
	if err != nil {
		return nil, err
	}
	if w.tpool, err = tracedPool(10, "transport"); err != nil {
		return nil, err
	}
	if _, err := pgstate.Migrate(ctx, w.tpool, w.tschema); err != nil {
		return nil, err
	}
	if w.apiStore, err = postgres.New(apiPool, schema); err != nil {
		return nil, err
	}
	if w.workerStore, err = postgres.New(workerPool, schema); err != nil {
		return nil, err
	}
	// serve's side calls no provider here (its reconciler never runs): the
	// world starts no simulator of its own; the worker's is per sample.
	if w.world, err = harness.New(harness.Options{Store: w.apiStore, ProviderURL: "http://127.0.0.1:9", Logger: quietLogger()}); err != nil {
		return nil, err
	}
	w.workerLg, err = ledger.New(ledger.Config{Store: w.workerStore, Clock: w.world.Clock, Logger: quietLogger()})
	return w, err
}

// withSim starts a fresh provider simulator and points a fresh worker (its
// provider client, its dispatcher) at it: the sample meets a simulator
// holding nothing but what the sample sends. The worker's ledger, and so
// its state cache, stays (it never saw the sample's operations).
func (w *e2eWorld) withSim(ctx context.Context, s *settings) (stop func(), err error) {
	sp, err := startSim(ctx, s, "")
	if err != nil {
		return nil, err
	}
	client, err := provider.New(provider.Config{Profile: w.world.Profile, BaseURL: sp.URL, MaxAttempts: 3, Timeout: 10 * time.Second,
		Concurrency: e2eConcurrency, After: w.world.ClientTimers.After, Logger: quietLogger()})
	if err != nil {
		sp.stop()
		return nil, err
	}
	wk, err := worker.New(worker.Config{ID: "bench-worker", Ledger: w.workerLg, Provider: client, Clock: w.world.Clock,
		Logger: quietLogger(), After: w.world.WorkerTimers.After})
	if err != nil {
		sp.stop()
		return nil, err
	}
	w.dispatcher, err = transport.NewDispatcher(transport.DispatcherConfig{Worker: wk, Evidence: w.workerLg, WorkerID: "bench-worker",
		Clock: w.world.Clock, Logger: quietLogger()})
	if err != nil {
		sp.stop()
		return nil, err
	}
	return sp.stop, nil
}

func (w *e2eWorld) close() {
	w.world.Close()
	for _, p := range w.pools {
		p.Close()
	}
}

// approve authorizes n new refunds (untimed) and returns their requests.
func (w *e2eWorld) approve(ctx context.Context, n int) ([]transport.RefundRequest, error) {
	out := make([]transport.RefundRequest, n)
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		firstErr error
		once     sync.Once
	)
	base := w.seq.Add(int64(n)) - int64(n)
	for range e2eConcurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if int(i) >= n {
					return
				}
				op := domain.OperationID(fmt.Sprintf("OP-E2E%d", base+i))
				ref, err := w.world.Approve(ctx, op, "ORD-"+string(op), 12000)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				out[i] = transport.RefundRequest{MessageID: domain.MessageID("MSG-" + uuid.NewString()), CorrelationID: domain.CorrelationID("COR-" + string(op)),
					OperationID: op, CapabilityID: ref.Capability}
			}
		})
	}
	wg.Wait()
	return out, firstErr
}

// counting wraps the dispatcher: it signals done once n refunds were
// claimed and recorded.
func (w *e2eWorld) counting(n int, done chan<- struct{}) transport.HandleFunc {
	var claimed atomic.Int64
	dispatcher := w.dispatcher
	return func(ctx context.Context, in transport.Inbound) transport.Disposition {
		t0 := time.Now()
		d := dispatcher.Handle(ctx, in)
		if watch := w.watch.Load(); watch != nil {
			watch.handled(time.Since(t0))
		}
		if d.Handled && d.Result.Claim.Status == domain.StatusClaimed && d.Result.Recorded != "" {
			if claimed.Add(1) == int64(n) {
				close(done)
			}
		}
		return d
	}
}

// skipLog moves the relays' checkpoints to the end of the log (untimed): the
// refunds the worker-alone samples approved (and executed) are not part of
// the next backlog. Without it, every end-to-end sample also drained the
// previous baseline sample's refunds (refused as spent, each recorded):
// twice the messages for the refunds it counted.
func (w *e2eWorld) skipLog(ctx context.Context) error {
	for _, relay := range []string{transport.RelayRefundRequests, transport.RelaySecuritySignals} {
		if err := w.skipRelay(ctx, relay); err != nil {
			return err
		}
	}
	return nil
}

// skipRelay moves relay's checkpoint to the end of the log.
func (w *e2eWorld) skipRelay(ctx context.Context, relay string) error {
	text, err := w.checks.Load(ctx, relay)
	if err != nil {
		return err
	}
	var after eventstore.Position
	if text != "" {
		if after, err = w.apiStore.ParsePosition(text); err != nil {
			return err
		}
	}
	for moved := false; ; moved = true {
		batch, err := w.apiStore.ReadAll(ctx, after, 1000)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			if !moved {
				return nil
			}
			return w.checks.Save(ctx, relay, after.String())
		}
		after = batch[len(batch)-1].Position
	}
}

// sample approves a backlog, then times it from the relays' start to the
// last refund recorded. run starts the relays and returns a stop function.
// The relays start past everything approved before.
func (w *e2eWorld) sample(ctx context.Context, s *settings, n int, start func(ctx context.Context, handle transport.HandleFunc) (stop func(), err error)) (float64, error) {
	if err := w.skipLog(ctx); err != nil {
		return 0, err
	}
	if _, err := w.approve(ctx, n); err != nil {
		return 0, err
	}
	stopSim, err := w.withSim(ctx, s)
	if err != nil {
		return 0, err
	}
	defer stopSim()
	done := make(chan struct{})
	w.counter.reset()
	w.startWatch(ctx)
	t0 := time.Now()
	stop, err := start(ctx, w.counting(n, done))
	if err != nil {
		return 0, err
	}
	defer stop()
	select {
	case <-done:
		if debug {
			w.watch.Load().report(ctx, "drained", n)
			w.counter.mu.Lock()
			for k, v := range w.counter.kinds {
				fmt.Fprintf(os.Stderr, "%6d %s\n", v, k)
			}
			w.counter.mu.Unlock()
		}
	case <-time.After(2 * time.Minute):
		return 0, errors.New("the backlog was not drained within 2 minutes")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// alone hands a backlog straight to the dispatcher from e2eConcurrency
// goroutines: the worker's and the ledger's own cost, no relay, no
// transport.
func (w *e2eWorld) alone(ctx context.Context, s *settings, n int) (float64, error) {
	reqs, err := w.approve(ctx, n)
	if err != nil {
		return 0, err
	}
	stopSim, err := w.withSim(ctx, s)
	if err != nil {
		return 0, err
	}
	defer stopSim()
	work := make(chan transport.Inbound, n)
	for _, r := range reqs {
		v, err := r.Encode()
		if err != nil {
			return 0, err
		}
		work <- transport.Inbound{Key: []byte(r.OperationID), Value: v, Origin: transport.Origin{Transport: "bench"}}
	}
	close(work)
	done := make(chan struct{})
	handle := w.counting(n, done)
	w.counter.reset()
	w.startWatch(ctx)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range e2eConcurrency {
		wg.Go(func() {
			for in := range work {
				handle(ctx, in)
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	default:
		return 0, errors.New("the worker alone did not claim every refund")
	}
	if debug {
		w.watch.Load().report(ctx, "alone", n)
	}
	return float64(n) / time.Since(t0).Seconds(), nil
}

// logBytesPerRefund is the event log's size on disk (table, TOAST and
// indexes) per refund, and its events per refund, over everything the
// figure wrote (every refund approved and executed once).
func (w *e2eWorld) logBytesPerRefund(ctx context.Context) (float64, float64, error) {
	var bytes, events float64
	err := w.tpool.QueryRow(ctx, `SELECT pg_total_relation_size('bench_e2e_store.events'), (SELECT count(*) FROM bench_e2e_store.events)`).Scan(&bytes, &events)
	if err != nil {
		return 0, 0, err
	}
	refunds := float64(w.seq.Load())
	return bytes / refunds, events / refunds, nil
}

// goRun runs f until stop is called.
func goRun(ctx context.Context, f func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() { defer close(finished); _ = f(ctx) }()
	return func() { cancel(); <-finished }
}

func runEndToEnd(ctx context.Context, s *settings, emit func(figure)) error {
	w, err := newE2EWorld(ctx, s)
	if err != nil {
		return err
	}
	defer w.close()
	checks, err := pgstate.NewCheckpoints(w.tpool, w.tschema)
	if err != nil {
		return err
	}
	w.checks = checks
	sa, err := pgsetaside.New(w.tpool, w.tschema)
	if err != nil {
		return err
	}
	// serve's relays (roles.Build), publishing to pub.
	relaysOn := func(pub transport.Publisher) (*relaySet, error) {
		built, err := roles.Build(roles.Config{Store: w.apiStore, Logger: quietLogger(), SetAside: sa,
			Relays: &transport.RelaysConfig{Checkpoints: checks, Publisher: pub,
				Tune: func(c *transport.RelayConfig) { c.PollMax = 20 * time.Millisecond }}})
		if err != nil {
			return nil, err
		}
		return &relaySet{relays: built.Relays}, nil
	}
	if _, err := w.alone(ctx, s, 50); err != nil { // warm the pools
		return err
	}
	if err := riverMigrate(ctx, s); err != nil {
		return err
	}
	// River's first sample on its fresh tables ran at a third of the later
	// ones' rate (300 jobs: about 1,000 jobs/s, then 2,900): an untimed one
	// first, as opledger's pools are warmed above.
	if _, err := riverSample(ctx, s, s.backlog); err != nil {
		return err
	}
	river := func(ctx context.Context) (float64, error) { return riverSample(ctx, s, s.backlog) }
	vsRiver := func(name string, ours, peer []float64) figure {
		f := rateFigure(name, "refunds/s", "River jobs/s", "ratio >= 1.25", ours, peer)
		f.note = riverGuarantees + "; opledger: " + opledgerWorkerGuarantees
		return f
	}

	if s.wants("e2e_pgqueue", "statements_per_refund", "commits_per_refund") {
		q, err := pgqueue.New(pgqueue.Config{DB: w.tpool, Schema: w.tschema, WorkerID: "bench-worker", Concurrency: e2eConcurrency,
			PollMin: time.Millisecond, PollMax: 20 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			return err
		}
		relay, err := relaysOn(q)
		if err != nil {
			return err
		}
		var stmts, commits, baseStmts, baseCommits []float64
		all, err := interleaveN(ctx, s.rounds,
			func(ctx context.Context) (float64, error) {
				rate, err := w.sample(ctx, s, s.backlog, func(ctx context.Context, handle transport.HandleFunc) (func(), error) {
					stopRelay := goRun(ctx, relay.Run)
					if debug {
						t0, p0 := time.Now(), relay.Published()
						go func() {
							for relay.Published()-p0 < int64(s.backlog) && time.Since(t0) < 10*time.Second {
								time.Sleep(time.Millisecond)
							}
							fmt.Fprintf(os.Stderr, "relay published %d in %s\n", relay.Published()-p0, time.Since(t0))
						}()
					}
					stopQueue := goRun(ctx, func(ctx context.Context) error { return q.Consume(ctx, handle) })
					return func() { stopQueue(); stopRelay() }, nil
				})
				stmts = append(stmts, float64(w.counter.statements.Load())/float64(s.backlog))
				commits = append(commits, float64(w.counter.commits.Load())/float64(s.backlog))
				return rate, err
			},
			func(ctx context.Context) (float64, error) {
				rate, err := w.alone(ctx, s, s.backlog)
				baseStmts = append(baseStmts, float64(w.counter.statements.Load())/float64(s.backlog))
				baseCommits = append(baseCommits, float64(w.counter.commits.Load())/float64(s.backlog))
				return rate, err
			}, river)
		if err != nil {
			return fmt.Errorf("e2e_pgqueue: %w", err)
		}
		ours, base := all[0], all[1]
		f := rateFigure("e2e_pgqueue", "refunds/s", "worker alone", "value >= 1500 && ratio >= 0.8", ours, base)
		f.note = fmt.Sprintf("backlog of %d refunds per sample, %d in flight, zero-latency provider simulator over HTTP (a process started fresh for each sample)", s.backlog, e2eConcurrency)
		emit(f)
		emit(vsRiver("e2e_pgqueue_vs_river", ours, all[2]))
		alone := rateFigure("e2e_alone_vs_river", "refunds/s", "River jobs/s", "", base, all[2])
		alone.note = "the part the transport does not hold: the worker alone (no relay, no queue: the ledger's cold read, two appends, the call) beside River, same samples"
		emit(alone)
		st := rateFigure("statements_per_refund_pgqueue", "statements", "worker alone", "value <= 4", stmts, baseStmts)
		st.note = "every statement the worker, the queue and the relay sent while the backlog drained, per refund"
		emit(st)
		cm := rateFigure("commits_per_refund_pgqueue", "commits", "worker alone", "value <= 2.5", commits, baseCommits)
		cm.note = "statements that wrote (each its own transaction), per refund; a group commit counts once"
		emit(cm)
		if bytes, events, err := w.logBytesPerRefund(ctx); err == nil {
			emit(figure{Figure: "log_bytes_per_refund", Value: round(bytes), Unit: "bytes",
				note: fmt.Sprintf("the events table with its indexes, per refund approved and executed (%.1f events each)", events)})
		}
	}

	if s.wants("e2e_kafka") {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(e2eConcurrency, transport.TopicRefundRequests),
			kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals), kfake.GroupMinSessionTimeout(time.Second))
		if err != nil {
			return err
		}
		defer cluster.Close()
		brokers := cluster.ListenAddrs()
		pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers})
		if err != nil {
			return err
		}
		defer pub.Close()
		relay, err := relaysOn(pub)
		if err != nil {
			return err
		}
		consumer, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: brokers, WorkerID: "bench-worker", GroupID: "bench", SetAside: sa,
			HeartbeatInterval: 100 * time.Millisecond, SessionTimeout: 3 * time.Second, RebalanceTimeout: 5 * time.Second,
			JoinGroupBackoff: 100 * time.Millisecond, MaxWait: 100 * time.Millisecond, Logger: quietLogger()})
		if err != nil {
			return err
		}
		defer consumer.Close()
		// One consumer for the whole figure (joining a group takes a while);
		// each sample's handle is swapped in.
		var current atomic.Pointer[transport.HandleFunc]
		stopConsumer := goRun(ctx, func(ctx context.Context) error {
			return consumer.Consume(ctx, func(ctx context.Context, in transport.Inbound) transport.Disposition {
				return (*current.Load())(ctx, in)
			})
		})
		defer stopConsumer()
		all, err := interleaveN(ctx, s.rounds,
			func(ctx context.Context) (float64, error) {
				return w.sample(ctx, s, s.backlog, func(ctx context.Context, handle transport.HandleFunc) (func(), error) {
					current.Store(&handle)
					return goRun(ctx, relay.Run), nil
				})
			},
			func(ctx context.Context) (float64, error) { return w.alone(ctx, s, s.backlog) }, river)
		if err != nil {
			return fmt.Errorf("e2e_kafka: %w", err)
		}
		f := rateFigure("e2e_kafka", "refunds/s", "worker alone", "value >= 1500 && ratio >= 0.8", all[0], all[1])
		f.note = fmt.Sprintf("kfake in process over loopback TCP, %d partitions, one consumer", e2eConcurrency)
		emit(f)
		emit(vsRiver("e2e_kafka_vs_river", all[0], all[2]))
	}
	return nil
}

// opledgerWorkerGuarantees is what the end-to-end path does that River's
// jobs do not, stated beside every comparison with River.
const opledgerWorkerGuarantees = "the capability consumed and the Claimed event (lease, fencing epoch) durable before the call, " +
	"the outcome recorded as an event before the message is acknowledged, every event in the hash-chained log"

// relaySet runs serve's relays together.
type relaySet struct{ relays []*transport.Relay }

// Run runs every relay until ctx ends.
func (r *relaySet) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, rl := range r.relays {
		wg.Go(func() { _ = rl.Run(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// Published counts the messages every relay published.
func (r *relaySet) Published() int64 {
	var n int64
	for _, rl := range r.relays {
		n += rl.Published()
	}
	return n
}
