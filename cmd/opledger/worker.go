package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

func init() {
	register("worker", "the worker role: take refund requests from Kafka or the Postgres queue and execute them", runWorker)
	// `opledger migrate` also creates the transport's schema (relay
	// checkpoints, the Postgres queue, resubmissions).
	extraMigrations = append(extraMigrations, extraMigration{
		name:   "transport",
		schema: func(*dbConfig) string { return transportSchemaDefault() },
		migrate: func(ctx context.Context, pool *pgxpool.Pool, schema string) ([]int, error) {
			return pgqueue.Migrate(ctx, pool, schema)
		},
	})
}

func transportSchemaDefault() string { return env("OPLEDGER_TRANSPORT_SCHEMA", pgqueue.DefaultSchema) }

// transportFlags are the settings that choose and reach a transport.
type transportFlags struct {
	brokers string // empty: the Postgres-only transport
	group   string
	schema  string
}

func addTransportFlags(fs *flag.FlagSet) *transportFlags {
	t := &transportFlags{}
	fs.StringVar(&t.brokers, "kafka-brokers", env("KAFKA_BROKERS", ""), "Kafka brokers host:port[,host:port]; empty: the Postgres-only transport [KAFKA_BROKERS]")
	fs.StringVar(&t.group, "kafka-group", env("KAFKA_GROUP_ID", "opledger-workers"), "Kafka consumer group of the workers [KAFKA_GROUP_ID]")
	fs.StringVar(&t.schema, "transport-schema", transportSchemaDefault(), "schema of the transport tables: relay checkpoints, Postgres queue [OPLEDGER_TRANSPORT_SCHEMA]")
	return t
}

// kafkaBrokers returns the parsed broker list, or nil for the Postgres-only
// transport.
func (t *transportFlags) kafkaBrokers() ([]string, error) {
	if t.brokers == "" {
		return nil, nil
	}
	b, err := kafka.ParseBrokers(t.brokers)
	if err != nil {
		return nil, fmt.Errorf("KAFKA_BROKERS: %w", err)
	}
	return b, nil
}

// workerSettings are the worker command's settings once validated.
type workerSettings struct {
	id          string
	providerURL string
	profile     domain.ProviderProfile
	concurrency int
	relay       bool
	brokers     []string
	exportURL   string // the export-delivery service, for export downloads; "" none
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("worker", "[--worker-id ID] [--provider-url URL] [--kafka-brokers LIST] [--relay]", stderr)
	db := dbFlags(fs)
	tf := addTransportFlags(fs)
	id := fs.String("worker-id", env("OPLEDGER_WORKER_ID", defaultWorkerID()), "names this worker on leases, claims and dead letters [OPLEDGER_WORKER_ID]")
	providerURL := fs.String("provider-url", env("PROVIDER_URL", ""), "the payment provider's base URL, e.g. http://127.0.0.1:8081 [PROVIDER_URL]")
	pf := addProviderFlags(fs)
	exportURL := addExportDeliveryFlag(fs)
	concurrency := fs.String("concurrency", env("OPLEDGER_WORKER_CONCURRENCY", strconv.Itoa(pgqueue.DefaultConcurrency)), "messages handled at once on the Postgres queue (Kafka: one per assigned partition) [OPLEDGER_WORKER_CONCURRENCY]")
	relay := fs.Bool("relay", env("OPLEDGER_WORKER_RELAY", "") == "true", "also run the relays (log to transport), for a single machine without 'serve' [OPLEDGER_WORKER_RELAY=true]")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	s, err := workerConfig(*id, *providerURL, pf, *concurrency, *relay, tf)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	s.exportURL = *exportURL
	log := newLogger(stderr).With("worker", s.id)
	if err := serveWorker(ctx, db, tf, s, log); err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "worker", err)
	}
	return 0
}

// workerConfig validates the worker's settings, naming the one at fault.
func workerConfig(id, providerURL string, pf *providerFlags, concurrency string, relay bool, tf *transportFlags) (workerSettings, error) {
	s := workerSettings{id: id, providerURL: providerURL, relay: relay}
	var errs []error
	if err := checkWorkerID(id); err != nil {
		errs = append(errs, err)
	}
	if providerURL == "" {
		errs = append(errs, errors.New("no provider: set PROVIDER_URL or --provider-url"))
	}
	p, err := pf.resolve()
	if err != nil {
		errs = append(errs, err)
	}
	s.profile = p
	n, err := strconv.Atoi(concurrency)
	if err != nil || n < 1 || n > pgqueue.MaxConcurrency {
		errs = append(errs, fmt.Errorf("OPLEDGER_WORKER_CONCURRENCY %q: want 1..%d", concurrency, pgqueue.MaxConcurrency))
	}
	s.concurrency = n
	if s.brokers, err = tf.kafkaBrokers(); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

func checkWorkerID(id string) error {
	if id == "" || len(id) > domain.MaxIDLength {
		return fmt.Errorf("worker id %q: want 1..%d printable characters", id, domain.MaxIDLength)
	}
	for _, r := range id {
		if r <= ' ' || r >= 0x7f {
			return fmt.Errorf("worker id %q: contains %q (printable ASCII without spaces only)", id, r)
		}
	}
	return nil
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// serveWorker runs the worker role (and the relays, when asked) until ctx
// ends; messages in flight drain within the transport's drain timeout.
func serveWorker(ctx context.Context, db *dbConfig, tf *transportFlags, s workerSettings, log *slog.Logger) error {
	pool, err := db.pool(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return err
	}
	defer opened.Release()
	store := opened.Store
	if err := pgqueue.CheckSchema(ctx, pool, tf.schema); err != nil {
		return err
	}
	lg, err := ledger.New(ledger.Config{Store: store, Logger: log})
	if err != nil {
		return err
	}
	client, err := newProviderClient(s.profile, s.providerURL, log, nil)
	if err != nil {
		return err
	}
	exports, err := newExportClient(s.exportURL, log, nil)
	if err != nil {
		return err
	}
	cfg := worker.Config{ID: s.id, Ledger: lg, Provider: client, Logger: log}
	if exports != nil {
		cfg.Exports = exports
	}
	wk, err := worker.New(cfg)
	if err != nil {
		return err
	}
	dispatcher, err := transport.NewDispatcher(transport.DispatcherConfig{Worker: wk, Evidence: lg, WorkerID: s.id, Logger: log})
	if err != nil {
		return err
	}
	source, publisher, closeTransport, err := openTransport(pool, tf, s, log)
	if err != nil {
		return err
	}
	defer closeTransport()
	log.InfoContext(ctx, "worker starting", "transport", transportName(s.brokers), "provider_profile", s.profile.Name, "relay", s.relay)

	g, gctx := errgroup.WithContext(ctx)
	if s.relay {
		checks, err := pgqueue.NewCheckpoints(pool, tf.schema)
		if err != nil {
			return err
		}
		sa, err := pgqueue.NewSetAside(pool, tf.schema)
		if err != nil {
			return err
		}
		rs, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: publisher,
			SetAside: sa, Leader: relayLeader(pool, tf.schema), Logger: log})
		if err != nil {
			return err
		}
		for _, r := range rs {
			g.Go(func() error { return r.Run(gctx) })
		}
	}
	g.Go(func() error { return source.Consume(gctx, dispatcher.Handle) })
	err = g.Wait()
	if ctx.Err() != nil {
		log.InfoContext(context.WithoutCancel(ctx), "worker stopped")
		return nil
	}
	return err
}

// relayLeader gives each relay its PostgreSQL leader lock, so that serve
// instances (and workers run with --relay) publish each message once.
func relayLeader(pool *pgxpool.Pool, schema string) func(string) (transport.Leadership, error) {
	return func(name string) (transport.Leadership, error) { return pgqueue.NewLeader(pool, schema, name) }
}

func transportName(brokers []string) string {
	if brokers == nil {
		return "postgres"
	}
	return "kafka"
}

// openTransport returns the configured transport's Source and Publisher:
// Kafka when brokers are set, else the Postgres queue.
func openTransport(pool *pgxpool.Pool, tf *transportFlags, s workerSettings, log *slog.Logger) (transport.Source, transport.Publisher, func(), error) {
	if s.brokers == nil {
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: tf.schema, WorkerID: s.id, Concurrency: s.concurrency, Logger: log})
		if err != nil {
			return nil, nil, nil, err
		}
		return q, q, func() {}, nil
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: s.brokers})
	if err != nil {
		return nil, nil, nil, err
	}
	sa, err := pgqueue.NewSetAside(pool, tf.schema)
	if err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: s.brokers, WorkerID: s.id, GroupID: tf.group, DeadLetters: pub, SetAside: sa, Logger: log})
	if err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	return c, pub, func() { _ = pub.Close() }, nil
}
