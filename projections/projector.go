package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain/setaside"
)

// Projector follows the global log and folds it into the read models of one
// schema. Several projectors may run on one schema (in one process or many):
// one holds the leader lock and applies, the others wait to take over. Safe
// for concurrent use.
type Projector struct {
	cfg     Config
	applier *applier
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
	return &Projector{cfg: cfg, applier: newApplier(cfg.Store, cfg.Schema, cfg.Name)}, nil
}

// Status returns a snapshot of the projector's status.
func (p *Projector) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
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
	lock := p.newLeaderLock()
	defer lock.release()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		held, err := lock.tryAcquire(ctx)
		if err != nil && ctx.Err() == nil {
			p.cfg.Logger.WarnContext(ctx, "projector: leader lock unavailable", "projection", p.cfg.Name, "err", err)
		}
		if !held {
			if !sleep(ctx, p.cfg.LockRetryInterval, nil) {
				return ctx.Err()
			}
			continue
		}
		p.setLeading(true, lock.pid())
		p.cfg.Logger.InfoContext(ctx, "projector: leading", "projection", p.cfg.Name, "schema", p.cfg.Schema)
		err = p.lead(ctx, lock)
		p.setLeading(false, 0)
		lock.release()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrSchemaOutdated):
			return fmt.Errorf("projector %s: %w", p.cfg.Name, err)
		case errors.Is(err, errLeadershipLost):
			p.cfg.Logger.WarnContext(ctx, "projector: stepped down", "projection", p.cfg.Name, "err", err)
		default:
			return fmt.Errorf("projector %s: %w", p.cfg.Name, err)
		}
	}
}

// lead applies batches while the leader lock holds. It returns when ctx
// ends, the lock is lost, or MaxConsecutiveFailures batches failed in a
// row.
func (p *Projector) lead(ctx context.Context, lock *leaderLock) error {
	cp, err := p.loadCheckpoint(ctx)
	for failures := 0; err != nil; {
		// Without a checkpoint there is nothing to do: retry, bounded like
		// a failed batch.
		if err := p.failed(ctx, err, &failures); err != nil {
			return err
		}
		cp, err = p.loadCheckpoint(ctx)
	}
	reader := newLogReader(p.cfg.Store, p.cfg.BatchSize)
	defer reader.close()
	backoff := p.cfg.MinBackoff
	failures := 0
	moved := false // the last batch found the checkpoint moved
	for {
		n, err := p.step(ctx, lock, reader, &cp)
		var retry *retryEvent
		switch {
		case err == nil:
			failures, moved = 0, false
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &retry):
			// An event's failure, not the database's: the events before it
			// are folded; pause as its policy says, then try it again.
			failures, moved = 0, false
			if !sleep(ctx, retry.delay, nil) {
				return ctx.Err()
			}
			continue
		case errors.Is(err, errCheckpointMoved):
			// Another writer moved the checkpoint (a rebuild was swapped in,
			// or a batch committed though its commit reported failure):
			// continue from where the row says. Moved again at once means
			// someone else is applying: back off as after a failure.
			p.cfg.Logger.InfoContext(ctx, "projector: checkpoint moved; reloading", "projection", p.cfg.Name, "err", err)
			if moved {
				if err := p.failed(ctx, err, &failures); err != nil {
					return err
				}
			}
			moved = true
			reloaded, err := p.loadCheckpoint(ctx)
			if err != nil {
				if err := p.failed(ctx, err, &failures); err != nil {
					return err
				}
				continue
			}
			cp = reloaded
			continue
		default:
			if err := p.failed(ctx, err, &failures); err != nil {
				return err
			}
			continue
		}
		if n == p.cfg.BatchSize {
			backoff = p.cfg.MinBackoff
			continue // more is waiting
		}
		if n > 0 {
			backoff = p.cfg.MinBackoff
		}
		if !sleep(ctx, backoff, p.cfg.Wake) {
			return ctx.Err()
		}
		if n == 0 {
			backoff = min(backoff*2, p.cfg.MaxBackoff)
		}
	}
}

// failed handles a failed batch: it returns err when the batch must not be
// retried (lost lock, outdated schema, ctx ended, too many failures) and
// otherwise logs it and pauses.
func (p *Projector) failed(ctx context.Context, err error, failures *int) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, errLeadershipLost) || errors.Is(err, ErrSchemaOutdated) {
		return err
	}
	*failures++
	if p.cfg.MaxConsecutiveFailures > 0 && *failures >= p.cfg.MaxConsecutiveFailures {
		return fmt.Errorf("%d consecutive failed batches: %w", *failures, err)
	}
	p.cfg.Logger.WarnContext(ctx, "projector: batch failed; retrying", "projection", p.cfg.Name, "failures", *failures, "err", err)
	pause := min(p.cfg.MinBackoff<<min(*failures-1, 20), p.cfg.MaxBackoff)
	if !sleep(ctx, pause, nil) {
		return ctx.Err()
	}
	return nil
}

// step reads one batch after cp (reader may have read it ahead) and
// applies it in one transaction, moving cp on commit. It returns how many
// events it applied. An event that cannot be folded is recorded: set aside,
// it is skipped and the batch applied again without it; else the events
// before it are applied and step returns a *retryEvent.
func (p *Projector) step(ctx context.Context, lock *leaderLock, reader *logReader, cp *Checkpoint) (int, error) {
	b := reader.next(ctx, *cp)
	if b.err != nil {
		return 0, b.err
	}
	if len(b.events) == 0 {
		return 0, nil
	}
	if err := lock.check(ctx); err != nil {
		return 0, err
	}
	through := b.events[len(b.events)-1].Position
	skips := skipSet{}
	for range len(b.events) + 1 { // bounded: each pass either ends or skips one more event of the batch
		now := p.cfg.Clock.Now()
		next, skipped, err := p.applier.applyInTx(ctx, p.cfg.Pool, *cp, b.decoded, through, now, skips)
		if err == nil {
			p.advance(cp, next)
			p.committed(ctx, b.decoded, skipped, skips, now)
			return len(b.events), nil
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
			prefix := b.decoded[:ee.index]
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
	return 0, fmt.Errorf("projector %s: a batch of %d events failed on more events than it holds", p.cfg.Name, len(b.events))
}

// advance moves cp to next after a commit.
func (p *Projector) advance(cp *Checkpoint, next Checkpoint) {
	*cp = next
	p.mu.Lock()
	p.status.Checkpoint = next
	p.status.Batches++
	p.mu.Unlock()
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
	lock := p.newLeaderLock()
	defer lock.release()
	for {
		held, err := lock.tryAcquire(ctx)
		if err != nil {
			return 0, err
		}
		if held {
			break
		}
		if !sleep(ctx, p.cfg.LockRetryInterval, nil) {
			return 0, ctx.Err()
		}
	}
	p.setLeading(true, lock.pid())
	defer p.setLeading(false, 0)
	cp, err := p.loadCheckpoint(ctx)
	if err != nil {
		return 0, err
	}
	reader := newLogReader(p.cfg.Store, p.cfg.BatchSize)
	defer reader.close()
	var applied int64
	for {
		n, err := p.step(ctx, lock, reader, &cp)
		applied += int64(n)
		if err != nil {
			return applied, fmt.Errorf("projector %s: %w", p.cfg.Name, err)
		}
		if n < p.cfg.BatchSize {
			return applied, nil
		}
	}
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

func (p *Projector) newLeaderLock() *leaderLock {
	config := p.cfg.Pool.Config().ConnConfig.Copy()
	config.RuntimeParams["application_name"] = p.cfg.ApplicationName
	return newLeaderLock(config, leaderLockKey(p.cfg.Schema, p.cfg.Name))
}

func (p *Projector) setLeading(leading bool, pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status.Leading, p.status.LockBackendPID = leading, pid
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

// sleep pauses for d, cut short by wake; it returns false if ctx ended.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}

// rollback ends tx after a failure; the rollback must reach the server even
// when ctx is why the batch failed.
func rollback(ctx context.Context, tx pgx.Tx) {
	_ = tx.Rollback(context.WithoutCancel(ctx)) // a failed rollback leaves the connection broken; pgx discards it
}
