// Package pgstack runs the PostgreSQL side of serve's roles for a story,
// the demo or a test: the projector (read models, and the index the
// sweeper and reconciler use) and the relays (roles.Build) feeding a
// transport, the Postgres queue or Kafka, with the transport's consumer
// carrying the story's messages. It is apart from adapters/harness so that
// the world a transport's tests use does not import the transports.
package pgstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/harness"
	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/roles"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/eventstore"
	"opledger/projections"
)

// Stack is the Postgres side of serve's roles for a story or a test: the
// projector (read models, and the index the sweeper and reconciler use) and
// the relays feeding the Postgres-only transport.
type Stack struct {
	Projector *projections.Projector
	Index     *projections.Index
	// SetAside keeps the roles' failing items in the transport schema, as
	// serve does; pass it to the World's sweeper and reconciler.
	SetAside *pgsetaside.Store
	Courier  *harness.SourceCourier

	cancel  context.CancelFunc
	closers []func()
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

// Options chooses the stack's schemas and transport.
type Options struct {
	ViewSchema, TransportSchema string
	// KafkaBrokers, when set, make the relay publish to Kafka and the story's
	// workers consume from a Kafka consumer group; otherwise both use the
	// Postgres-only queue. Relay checkpoints stay in TransportSchema.
	KafkaBrokers []string
	Logger       *slog.Logger
}

// Start migrates the read-model and transport schemas on pool
// (a no-op when current) and starts the projector, the relays over store and
// the transport's consumer until Stop.
func Start(ctx context.Context, pool *pgxpool.Pool, store eventstore.Store, o Options) (*Stack, error) {
	log, viewSchema, transportSchema := o.Logger, o.ViewSchema, o.TransportSchema
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := projections.Migrate(ctx, pool, viewSchema); err != nil {
		return nil, err
	}
	if _, err := pgstate.Migrate(ctx, pool, transportSchema); err != nil {
		return nil, err
	}
	failing, err := pgsetaside.New(pool, transportSchema)
	if err != nil {
		return nil, err
	}
	var (
		src     transport.Source
		pub     transport.Publisher
		closers []func()
	)
	if len(o.KafkaBrokers) > 0 {
		kp, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: o.KafkaBrokers, AllowAutoTopicCreation: true})
		if err != nil {
			return nil, err
		}
		kc, err := kafka.NewConsumer(kafka.ConsumerConfig{Brokers: o.KafkaBrokers, WorkerID: "story", GroupID: "opledger-story-" + transportSchema,
			DeadLetters: kp, SetAside: failing, MaxWait: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond, Logger: log})
		if err != nil {
			_ = kp.Close()
			return nil, err
		}
		src, pub = kc, kp
		closers = append(closers, func() { _ = kc.Close(); _ = kp.Close() })
	} else {
		q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: transportSchema, WorkerID: "story",
			RetryBackoff: 50 * time.Millisecond, PollMax: 50 * time.Millisecond, Logger: log})
		if err != nil {
			return nil, err
		}
		src, pub = q, q
	}
	checks, err := pgstate.NewCheckpoints(pool, transportSchema)
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	built, err := roles.Build(roles.Config{Store: store, Logger: log, SetAside: failing,
		Projector: &projections.Config{Pool: pool, Schema: viewSchema, MaxBackoff: 50 * time.Millisecond, LockRetryInterval: 100 * time.Millisecond},
		Relays:    &transport.RelaysConfig{Checkpoints: checks, Publisher: pub},
	})
	if err != nil {
		closeAll(closers)
		return nil, err
	}
	p, index, relays := built.Projector, built.Index.(*projections.Index), built.Relays
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Stack{Projector: p, Index: index, SetAside: failing, Courier: harness.NewSourceCourier(rctx, src, pub), cancel: cancel, closers: closers}
	run := func(name string, f func(context.Context) error) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := f(rctx); err != nil && rctx.Err() == nil {
				s.mu.Lock()
				s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
				s.mu.Unlock()
			}
		}()
	}
	run("projector", p.Run)
	for _, r := range relays {
		run("relay", r.Run)
	}
	return s, nil
}

// closeAll runs closers.
func closeAll(closers []func()) {
	for _, c := range closers {
		c()
	}
}

// Stop stops the projector and relays and returns what made any of them
// stop early.
func (s *Stack) Stop() error {
	s.cancel()
	s.wg.Wait()
	closeAll(s.closers)
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}
