package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/tracing"
	"opledger/adapters/transport"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore/follow"
)

func init() {
	register("worker", "the worker role: take refund requests from Kafka or the Postgres queue and execute them", runWorker)
}

// kafkaBrokers returns the parsed broker list (validated by the catalogue),
// or nil for the Postgres-only transport.
func kafkaBrokers(f *settings.Flags) ([]string, error) {
	text := f.Text(settings.KafkaBrokers)
	if text == "" {
		return nil, nil
	}
	b, err := kafka.ParseBrokers(text)
	if err != nil {
		return nil, f.Invalid(settings.KafkaBrokers, err.Error())
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
	group       string
	exportURL   string // the export-delivery service, for export downloads; "" none
	tracing     tracingConfig
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("worker", "[flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.TransportSchema, settings.KafkaBrokers, settings.KafkaGroup, settings.WorkerID,
		settings.ProviderURL, settings.ProviderProfile, settings.ProviderProfileFile,
		settings.ExportDeliveryURL, settings.WorkerConcurrency, settings.WorkerRelay, settings.LogLevel, settings.OTLPEndpoint)
	if code, ok := f.Parse(args); !ok {
		return code
	}
	s, err := workerConfig(f)
	if err != nil {
		return fail(stderr, "worker", err)
	}
	log := newLogger(stderr, f).With("worker", s.id)
	if err := serveWorker(ctx, dbFrom(f), s, log); err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, "worker", err)
	}
	return 0
}

// workerConfig reads the worker's settings, naming every one at fault.
func workerConfig(f *settings.Flags) (workerSettings, error) {
	s := workerSettings{id: f.Text(settings.WorkerID), providerURL: f.Text(settings.ProviderURL), relay: f.Bool(settings.WorkerRelay),
		concurrency: f.Int(settings.WorkerConcurrency), group: f.Text(settings.KafkaGroup), exportURL: f.Text(settings.ExportDeliveryURL),
		tracing: tracingFrom(f, "opledger-worker")}
	var errs []error
	if s.providerURL == "" {
		errs = append(errs, f.Missing(settings.ProviderURL, "provider"))
	}
	var err error
	if s.profile, err = resolveProfile(f); err != nil {
		errs = append(errs, err)
	}
	if s.brokers, err = kafkaBrokers(f); err != nil {
		errs = append(errs, err)
	}
	return s, errors.Join(errs...)
}

// serveWorker runs the worker role (and the relays, when asked) until ctx
// ends; messages in flight drain within the transport's drain timeout.
func serveWorker(ctx context.Context, db *dbConfig, s workerSettings, log *slog.Logger) error {
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
	if err := pgqueue.CheckSchema(ctx, pool, db.transport); err != nil {
		return schemaError(db, err, pgqueue.ErrSchemaOutdated)
	}
	lg, err := ledger.New(ledger.Config{Store: store, Logger: log})
	if err != nil {
		return err
	}
	// One call at a time per message handled (Kafka: per partition, up to
	// the same setting's worth kept idle).
	client, err := newProviderClient(s.profile, s.providerURL, s.concurrency, log, nil)
	if err != nil {
		return err
	}
	exports, err := newExportClient(s.exportURL, s.concurrency, log, nil)
	if err != nil {
		return err
	}
	tp, stopTracing, err := startTracing(ctx, s.tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	cfg := worker.Config{ID: s.id, Ledger: lg, Provider: tracing.Provider(client, tp), Logger: log}
	if exports != nil {
		cfg.Exports = tracing.Exports(exports, tp)
	}
	wk, err := worker.New(cfg)
	if err != nil {
		return err
	}
	dispatcher, err := transport.NewDispatcher(transport.DispatcherConfig{Worker: tracing.Worker(wk, tp), Evidence: lg, WorkerID: s.id, Logger: log})
	if err != nil {
		return err
	}
	source, publisher, closeTransport, err := openTransport(pool, db.transport, s, log)
	if err != nil {
		return err
	}
	defer closeTransport()
	log.InfoContext(ctx, "worker starting", "transport", transportName(s.brokers), "provider_profile", s.profile.Name, "relay", s.relay)

	g, gctx := errgroup.WithContext(ctx)
	if s.relay {
		checks, err := pgqueue.NewCheckpoints(pool, db.transport)
		if err != nil {
			return err
		}
		sa, err := pgqueue.NewSetAside(pool, db.transport)
		if err != nil {
			return err
		}
		rs, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: publisher,
			SetAside: sa, Leader: relayLeader(pool, db.transport), Logger: log})
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
func relayLeader(pool *pgxpool.Pool, schema string) func(string) (follow.Leadership, error) {
	return func(name string) (follow.Leadership, error) { return pgqueue.NewLeader(pool, schema, name) }
}

func transportName(brokers []string) string {
	if brokers == nil {
		return "postgres"
	}
	return "kafka"
}

// openTransport returns the configured transport's Source and Publisher:
// Kafka when brokers are set, else the Postgres queue in schema.
func openTransport(pool *pgxpool.Pool, schema string, s workerSettings, log *slog.Logger) (transport.Source, transport.Publisher, func(), error) {
	if s.brokers == nil {
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: s.id, Concurrency: s.concurrency, Logger: log})
		if err != nil {
			return nil, nil, nil, err
		}
		return q, q, func() {}, nil
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: s.brokers})
	if err != nil {
		return nil, nil, nil, err
	}
	sa, err := pgqueue.NewSetAside(pool, schema)
	if err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: s.brokers, WorkerID: s.id, GroupID: s.group, DeadLetters: pub, SetAside: sa, Logger: log})
	if err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	return c, pub, func() { _ = pub.Close() }, nil
}

// openPublisher returns the configured transport's Publisher alone (serve's
// relay): Kafka when brokers are set, else the Postgres queue in schema.
func openPublisher(pool *pgxpool.Pool, schema string, brokers []string, log *slog.Logger) (transport.Publisher, func(), error) {
	if brokers == nil {
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: "serve-relay", Concurrency: 1, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return q, func() {}, nil
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers})
	if err != nil {
		return nil, nil, err
	}
	return pub, func() { _ = pub.Close() }, nil
}
