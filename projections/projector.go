package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/follow"
	"opledger/eventstore/follow/pgleader"
)

// Projector follows the global log and folds it into the read models of one
// schema. Several projectors may run on one schema (in one process or many):
// one holds the leader lock and applies, the others wait to take over. The
// loop, the leadership, the pauses and the back-off are a follow.Follower's;
// the projector says what one batch does (step). Safe for concurrent use.
type Projector struct {
	cfg      Config
	applier  *applier
	lock     *pgleader.Lock
	follower *follow.Follower[[]decodedEvent]
	// failing is the event the projector stopped before after it failed
	// (only the leading loop touches it).
	failing string

	mu     sync.Mutex
	status Status
	cancel context.CancelFunc // set by Start
	done   chan struct{}
	runErr error
}

// Status is what a projector is doing, for health checks and tests.
type Status struct {
	// Leading is true while this projector holds the leader lock.
	Leading bool
	// LockBackendPID is the server process of the leader lock's session
	// while Leading (pg_stat_activity.pid), else 0.
	LockBackendPID uint32
	// Checkpoint is the last checkpoint this projector committed or read.
	Checkpoint Checkpoint
	// Batches counts the transactions this projector committed.
	Batches int64
}

// New validates cfg and returns a projector. It does no I/O.
func New(cfg Config) (*Projector, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.SetAside == nil {
		cfg.Logger.Warn("projector: no set-aside store configured: failing events are kept in memory and forgotten on restart", "projection", cfg.Name)
		cfg.SetAside = &setaside.Memory{}
	}
	p := &Projector{cfg: cfg, applier: newApplier(cfg.Store, cfg.Schema, cfg.Name)}
	lock, err := pgleader.New(cfg.Pool.Config().ConnConfig, leaderLockKey(cfg.Schema, cfg.Name), cfg.ApplicationName)
	if err != nil {
		return nil, fmt.Errorf("projector config: %w", err)
	}
	p.lock = lock
	p.follower, err = follow.New(follow.Config[[]decodedEvent]{
		Name: "projector " + cfg.Name, Store: cfg.Store, Handler: &projectorHandler{p: p},
		Prepare: decodeParallel, ReadAhead: true, Leader: lock,
		LeaderRetry: cfg.LockRetryInterval, BatchSize: cfg.BatchSize,
		PollMin: cfg.MinBackoff, PollMax: cfg.MaxBackoff, Wake: cfg.Wake,
		FailureBackoff: cfg.MinBackoff, MaxFailureBackoff: cfg.MaxBackoff, MaxFailures: cfg.MaxConsecutiveFailures,
		Now: cfg.Clock.Now, Logger: cfg.Logger.With("projection", cfg.Name),
		Regressions: cfg.Regressions, RegressionCache: domain.CacheProjectorCheckpoint,
	})
	if err != nil {
		return nil, fmt.Errorf("projector config: %w", err)
	}
	return p, nil
}

// Status returns a snapshot of the projector's status.
func (p *Projector) Status() Status {
	p.mu.Lock()
	s := p.status
	p.mu.Unlock()
	s.Leading = p.follower.Status().Leading
	if s.Leading {
		s.LockBackendPID = p.lock.BackendPID()
	}
	return s
}

// Run follows the log until ctx ends, and then returns ctx.Err(). It first
// checks the schema (an error wrapping ErrSchemaOutdated is returned at
// once). It then waits for the leader lock, trying every LockRetryInterval;
// while it holds it, it reads batches after the checkpoint and applies each
// in one transaction, pausing with a bounded back-off when the log is idle.
// Failures are logged and retried after the back-off (see
// MaxConsecutiveFailures); when the lock's session ends it steps down and
// waits for the lock again. An event that cannot be decoded or folded does
// not stop Run: it is tried again Policy.MaxAttempts times, then set aside
// and skipped (see failures.go), and the projection goes on.
func (p *Projector) Run(ctx context.Context) error {
	if err := CheckSchema(ctx, p.cfg.Pool, p.cfg.Schema); err != nil {
		return fmt.Errorf("projector %s: %w", p.cfg.Name, err)
	}
	return p.follower.Run(ctx)
}

// CatchUp applies batches until the log is exhausted and returns how many
// events it applied. It waits for the leader lock (trying every
// LockRetryInterval) until ctx ends, and releases it before returning. It
// does not retry: the first failure is returned (an event that cannot be
// folded is recorded as a failure, and skipped only once it is set aside).
// Tools and benchmarks use it; services use Run.
func (p *Projector) CatchUp(ctx context.Context) (int64, error) {
	if err := CheckSchema(ctx, p.cfg.Pool, p.cfg.Schema); err != nil {
		return 0, err
	}
	applied, err := p.follower.CatchUp(ctx)
	if err != nil {
		return applied, fmt.Errorf("projector %s: %w", p.cfg.Name, err)
	}
	return applied, nil
}

// projectorHandler is what the projector does with the log
// (follow.Handler): it folds each batch into the read models in one
// transaction that also moves the checkpoint. Only the follower's goroutine
// calls it.
type projectorHandler struct {
	p  *Projector
	cp Checkpoint // where the read models stand
	// moved: the last batch found the checkpoint moved under it.
	moved bool
}

// Resume implements follow.Handler: the checkpoint row, created if needed.
func (h *projectorHandler) Resume(ctx context.Context) (eventstore.Position, error) {
	cp, err := h.p.loadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	h.cp = cp
	return cp.Position, nil
}

// Handle implements follow.Handler: it applies b (step). An event that
// failed and is not set aside yet is a follow.Retry after its policy's
// delay. A checkpoint moved under it (a rebuild was swapped in, or a batch
// committed though its commit reported failure) is reloaded; moved again at
// once means someone else is applying: an outage, backed off.
func (h *projectorHandler) Handle(ctx context.Context, b follow.Batch[[]decodedEvent]) (eventstore.Position, error) {
	_, err := h.p.step(ctx, b, &h.cp)
	var retry *retryEvent
	switch {
	case err == nil:
		h.moved = false
		return h.cp.Position, nil
	case errors.As(err, &retry):
		h.moved = false
		return h.cp.Position, follow.Retry(retry.delay, retry)
	case errors.Is(err, errCheckpointMoved) && !h.moved:
		h.moved = true
		return nil, follow.Reload(err)
	}
	return nil, err
}

// Rewind implements follow.Rewinder: the log went back under the
// checkpoint (a failover lost the last commits), so the checkpoint moves
// back to to, where the log still holds what the read models folded; the
// events after it are folded again (re-applied events are no-ops). Rows
// the lost events made stay until `opledger projections rebuild`: the
// regression's alarm says so.
func (h *projectorHandler) Rewind(ctx context.Context, to eventstore.Position) error {
	var text *string
	if to != nil {
		t := to.String()
		text = &t
	}
	p := h.p
	if _, err := p.cfg.Pool.Exec(ctx, p.applier.sql.writeCheckpoint, p.cfg.Name, text, h.cp.EventsApplied, p.cfg.Clock.Now()); err != nil {
		return fmt.Errorf("projector %s: rewind checkpoint: %w", p.cfg.Name, err)
	}
	return nil
}

// Idle implements follow.Handler: an idle log asks nothing of the
// projector.
func (h *projectorHandler) Idle(context.Context) error { return nil }

// step applies b, read after cp, in one transaction, moving cp on commit.
// It returns how many events it applied. An event that cannot be folded is
// recorded: set aside, it is skipped and the batch applied again without
// it; else the events before it are applied and step returns a *retryEvent.
func (p *Projector) step(ctx context.Context, b follow.Batch[[]decodedEvent], cp *Checkpoint) (int, error) {
	if err := b.Lead(ctx); err != nil {
		return 0, err
	}
	decoded := b.Prepared
	through := b.Events[len(b.Events)-1].Position
	skips := skipSet{}
	for range len(b.Events) + 1 { // bounded: each pass either ends or skips one more event of the batch
		now := p.cfg.Clock.Now()
		next, skipped, err := p.applier.applyInTx(ctx, p.cfg.Pool, *cp, decoded, through, now, skips)
		if err == nil {
			p.advance(cp, next)
			p.committed(ctx, decoded, skipped, skips, now)
			return len(b.Events), nil
		}
		ee, isEvent := asEventError(err)
		if !isEvent {
			return 0, err
		}
		it, err := p.eventFailed(ctx, ee, now)
		if err != nil {
			return 0, err
		}
		if it.SetAside {
			skips[ee.id] = skipReason{reason: it.Reason, detail: it.Detail}
			continue
		}
		applied := 0
		if ee.index > 0 {
			prefix := decoded[:ee.index]
			next, skipped, err := p.applier.applyInTx(ctx, p.cfg.Pool, *cp, prefix, prefix[len(prefix)-1].rec.Position, now, skips)
			if err != nil {
				return 0, err
			}
			p.advance(cp, next)
			p.committed(ctx, prefix, skipped, skips, now)
			applied = ee.index
		}
		return applied, &retryEvent{delay: p.cfg.Policy.Delay(it.Attempts), attempts: it.Attempts, cause: ee}
	}
	return 0, fmt.Errorf("projector %s: a batch of %d events failed on more events than it holds", p.cfg.Name, len(b.Events))
}

// advance moves cp to next after a commit.
func (p *Projector) advance(cp *Checkpoint, next Checkpoint) {
	*cp = next
	p.mu.Lock()
	p.status.Checkpoint = next
	p.status.Batches++
	p.mu.Unlock()
}

// loadCheckpoint creates the checkpoint row if needed and reads it.
func (p *Projector) loadCheckpoint(ctx context.Context) (Checkpoint, error) {
	if err := ensureCheckpoint(ctx, p.cfg.Pool, p.applier.sql, p.cfg.Name, p.cfg.Clock.Now()); err != nil {
		return Checkpoint{}, err
	}
	cp, err := scanCheckpoint(p.cfg.Pool.QueryRow(ctx, p.applier.sql.readCheckpoint, p.cfg.Name), p.cfg.Store, p.cfg.Name)
	if err != nil {
		return Checkpoint{}, err
	}
	p.mu.Lock()
	p.status.Checkpoint = cp
	p.mu.Unlock()
	return cp, nil
}

// Start runs Run in a goroutine until Stop is called or ctx ends. It fails
// if the projector was already started.
func (p *Projector) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		return errors.New("projector: already started")
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		err := p.Run(ctx)
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.ErrorContext(ctx, "projector stopped", "projection", p.cfg.Name, "err", err)
		}
		p.mu.Lock()
		p.runErr = err
		p.mu.Unlock()
	}()
	return nil
}

// Stop stops a started projector, waits for its current batch to finish or
// roll back, and returns why Run ended if it ended by itself (nil when Stop
// ended it). Stop on a projector that was not started returns nil.
func (p *Projector) Stop() error {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	cancel()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	if errors.Is(p.runErr, context.Canceled) {
		return nil
	}
	return p.runErr
}

// Done is closed when a started projector's Run has returned; it is nil
// before Start.
func (p *Projector) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// rollback ends tx after a failure; the rollback must reach the server even
// when ctx is why the batch failed.
func rollback(ctx context.Context, tx pgx.Tx) {
	_ = tx.Rollback(context.WithoutCancel(ctx)) // a failed rollback leaves the connection broken; pgx discards it
}
