package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/roles"
	"opledger/adapters/tracing"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/clock"
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
	// heartbeat, session, rebalance: the consumer group's timings
	// (kafka.CheckGroupTiming).
	heartbeat, session, rebalance time.Duration
	exportURL                     string // the export-delivery service, for export downloads; "" none
	tracing                       tracingConfig
	replication                   replicationSettings // replication.go
	// shutdownTimeout bounds a stop: messages in flight, their provider
	// calls and their recording.
	shutdownTimeout time.Duration
}

func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("worker", "[flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.TransportSchema, settings.KafkaBrokers, settings.KafkaGroup,
		settings.KafkaSessionTimeout, settings.KafkaHeartbeatInterval, settings.KafkaRebalanceTimeout, settings.WorkerID,
		settings.ProviderURL, settings.ProviderProfile, settings.ProviderProfileFile,
		settings.ExportDeliveryURL, settings.WorkerConcurrency, settings.WorkerRelay, settings.ShutdownTimeout, settings.LogLevel, settings.OTLPEndpoint)
	f.Bind(replicationBindings...)
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
		tracing: tracingFrom(f, "opledger-worker"), replication: replicationFrom(f), shutdownTimeout: f.Duration(settings.ShutdownTimeout)}
	s.heartbeat, s.session, s.rebalance = f.Duration(settings.KafkaHeartbeatInterval), f.Duration(settings.KafkaSessionTimeout), f.Duration(settings.KafkaRebalanceTimeout)
	var errs []error
	if s.providerURL == "" {
		errs = append(errs, f.Missing(settings.ProviderURL, "provider"))
	}
	if err := kafka.CheckGroupTiming(s.heartbeat, s.session, s.rebalance); err != nil {
		errs = append(errs, fmt.Errorf("%s, %s, %s: %w", f.Name(settings.KafkaHeartbeatInterval), f.Name(settings.KafkaSessionTimeout), f.Name(settings.KafkaRebalanceTimeout), err))
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
	// Closing the pool waits for every connection in use: a worker that
	// passed its shutdown timeout leaves them to the process's exit.
	overdue := false
	defer func() {
		if !overdue {
			pool.Close()
		}
	}()
	opened, err := db.store(ctx, pool)
	if err != nil {
		return err
	}
	defer opened.Release()
	store := opened.Store
	if err := pgstate.CheckSchema(ctx, pool, db.transport); err != nil {
		return schemaError(db, err, pgstate.ErrSchemaOutdated)
	}
	repl, err := newReplicationWatch(s.replication, opened.Replication, log)
	if err != nil {
		return err
	}
	if repl != nil {
		if err := repl.start(ctx); err != nil {
			return err
		}
	}
	regressions, err := newRegressions(store, s.id, clock.System{}, log, nil)
	if err != nil {
		return err
	}
	lg, err := ledger.New(ledger.Config{Store: store, Logger: log, Regressions: regressions.recorder, CacheName: domain.CacheWorker})
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
	// The stop: ctx ends (SIGTERM), or a loop fails. From then on messages
	// in flight, their provider calls and their recording have the shutdown
	// timeout but its last moment (abandonGrace), in which what was
	// abandoned is logged.
	stopping, stop := context.WithCancel(ctx)
	defer stop()
	abandon, cancelAbandon := transport.DrainContext(stopping, s.drainTimeout())
	defer cancelAbandon()
	cfg := worker.Config{ID: s.id, Ledger: lg, Provider: tracing.Provider(client, tp), Logger: log, Abandon: abandon}
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
	defer func() {
		if !overdue {
			closeTransport()
		}
	}()
	log.InfoContext(ctx, "worker starting", "transport", transportName(s.brokers), "provider_profile", s.profile.Name, "relay", s.relay)

	g, gctx := errgroup.WithContext(stopping)
	context.AfterFunc(gctx, stop)
	go regressions.follow(gctx) // a regression another process noticed is logged here too
	if s.relay {
		checks, err := pgstate.NewCheckpoints(pool, db.transport)
		if err != nil {
			return err
		}
		sa, err := pgsetaside.New(pool, db.transport)
		if err != nil {
			return err
		}
		built, err := roles.Build(roles.Config{Store: store, Logger: log, SetAside: sa,
			Relays: &transport.RelaysConfig{Checkpoints: checks, Publisher: publisher, Leader: relayLeader(pool, db.transport),
				OperationFeed: len(s.brokers) > 0, Regressions: regressions.recorder}})
		if err != nil {
			return err
		}
		for _, r := range built.Relays {
			g.Go(func() error { return r.Run(gctx) })
		}
	}
	if repl != nil {
		g.Go(func() error { return repl.run(gctx) })
	}
	g.Go(func() error { return source.Consume(gctx, dispatcher.Handle) })
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err = <-done:
	case <-abandon.Done():
		// The recordings still running give up now and log what they could
		// not record; the shutdown timeout's last moment is for that.
		select {
		case err = <-done:
		case <-time.After(s.abandonGrace()):
			overdue = true
			log.ErrorContext(context.WithoutCancel(ctx), "stopping with work in flight: the shutdown timeout passed; what was not recorded is left to the lease's lapse and the reconciler",
				"shutdown_timeout", s.shutdownTimeout)
			return errShutdownOverdue
		}
	}
	if ctx.Err() != nil {
		log.InfoContext(context.WithoutCancel(ctx), "worker stopped")
		return nil
	}
	return err
}

// abandonGrace is the last moment of the shutdown timeout, in which the
// recordings a stopping worker abandoned say so in the log (they stop at
// once: their database calls end with their contexts): a second, a
// quarter of a shorter timeout.
func (s workerSettings) abandonGrace() time.Duration { return min(time.Second, s.shutdownTimeout/4) }

// drainTimeout is what a stop leaves messages in flight and their
// recording: the shutdown timeout but its last moment.
func (s workerSettings) drainTimeout() time.Duration { return s.shutdownTimeout - s.abandonGrace() }

// errShutdownOverdue is the worker's error when it stopped with work still
// in flight after its shutdown timeout.
var errShutdownOverdue = errors.New("stopped with work in flight after the shutdown timeout (--shutdown-timeout)")

// relayLeader gives each relay its PostgreSQL leader lock, so that serve
// instances (and workers run with --relay) publish each message once.
func relayLeader(pool *pgxpool.Pool, schema string) func(string) (follow.Leadership, error) {
	return func(name string) (follow.Leadership, error) { return pgstate.NewLeader(pool, schema, name) }
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
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: s.id, Concurrency: s.concurrency, DrainTimeout: s.drainTimeout(), Logger: log})
		if err != nil {
			return nil, nil, nil, err
		}
		return q, q, func() {}, nil
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: s.brokers})
	if err != nil {
		return nil, nil, nil, err
	}
	sa, err := pgsetaside.New(pool, schema)
	if err != nil {
		_ = pub.Close()
		return nil, nil, nil, err
	}
	c, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: s.brokers, WorkerID: s.id, GroupID: s.group, DeadLetters: pub, SetAside: sa,
		HeartbeatInterval: s.heartbeat, SessionTimeout: s.session, RebalanceTimeout: s.rebalance, DrainTimeout: s.drainTimeout(), Logger: log})
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
