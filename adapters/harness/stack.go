package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/eventstore"
	"opledger/projections"
)

// Stack is the Postgres side of serve's roles for a story or a test: the
// projector (read models, and the index the sweeper and reconciler use) and
// the relays feeding the Postgres-only transport.
type Stack struct {
	Projector *projections.Projector
	Index     *projections.Index
	Queue     *pgqueue.Queue
	Courier   *QueueCourier

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// StartPostgresStack migrates the read-model and transport schemas on pool
// (a no-op when current) and starts the projector and the relays over store
// until Stop.
func StartPostgresStack(ctx context.Context, pool *pgxpool.Pool, store eventstore.Store, viewSchema, transportSchema string, log *slog.Logger) (*Stack, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, err := projections.Migrate(ctx, pool, viewSchema); err != nil {
		return nil, err
	}
	if _, err := pgqueue.Migrate(ctx, pool, transportSchema); err != nil {
		return nil, err
	}
	p, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: viewSchema, Logger: log,
		MaxBackoff: 50 * time.Millisecond, LockRetryInterval: 100 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	index, err := projections.NewIndex(pool, viewSchema)
	if err != nil {
		return nil, err
	}
	q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: transportSchema, WorkerID: "story", VisibilityTimeout: time.Second, Logger: log})
	if err != nil {
		return nil, err
	}
	checks, err := pgqueue.NewCheckpoints(pool, transportSchema)
	if err != nil {
		return nil, err
	}
	relays, err := transport.StandardRelays(store, checks, q, log)
	if err != nil {
		return nil, err
	}
	s := &Stack{Projector: p, Index: index, Queue: q, Courier: &QueueCourier{Queue: q}}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
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

// Stop stops the projector and relays and returns what made any of them
// stop early.
func (s *Stack) Stop() error {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}
