package follow

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"opledger/eventstore"
)

// Follower follows the global log for one Handler while it holds its
// Leadership. Status is safe for concurrent use; Run and CatchUp are not
// (run one at a time).
type Follower[T any] struct {
	cfg Config[T]
	// marks are handled events to check the log against and rewind to
	// (regression.go), kept across spells of leadership: a failover
	// usually takes the leadership with it. Only Run's goroutine uses them.
	marks marks

	mu     sync.Mutex
	status Status
}

// New validates cfg and returns a follower. It does no I/O.
func New[T any](cfg Config[T]) (*Follower[T], error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Follower[T]{cfg: cfg}, nil
}

// Name returns the follower's name.
func (f *Follower[T]) Name() string { return f.cfg.Name }

// Run follows the log until ctx ends, then returns ctx.Err(). It waits for
// the leadership (trying every LeaderRetry), follows the log while it holds
// it, and steps down to wait again when it is lost. Outages are retried
// with a bounded back-off and reported in Status; with MaxFailures set, that
// many in a row make Run return the last error.
func (f *Follower[T]) Run(ctx context.Context) error {
	log := f.cfg.Logger
	defer f.cfg.Leader.Release(ctx)
	for wait := time.Duration(0); ; {
		if wait > 0 && !pause(ctx, wait, nil) {
			return ctx.Err()
		}
		wait = f.cfg.LeaderRetry
		held, err := f.cfg.Leader.TryAcquire(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			f.noteFailure(StageLeader, err, f.Status().Failures+1)
			log.WarnContext(ctx, "follow: leader lock unavailable", "err", err)
			continue
		}
		if !held {
			f.noteHealthy() // a standby is healthy: someone else leads
			continue
		}
		f.setLeading(true)
		log.InfoContext(ctx, "follow: leading")
		err = f.lead(ctx)
		f.setLeading(false)
		f.cfg.Leader.Release(ctx)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrLeadershipLost):
			log.WarnContext(ctx, "follow: stepped down; waiting to lead again", "err", err)
		default:
			return fmt.Errorf("%s: %w", f.cfg.Name, err)
		}
	}
}

// lead follows the log from the handler's checkpoint while the lock holds.
// It returns an error wrapping ErrLeadershipLost when the lock is lost, the
// last error once MaxFailures outages came in a row, or ctx's error.
func (f *Follower[T]) lead(ctx context.Context) error {
	l := &leading[T]{f: f, poll: f.cfg.PollMin, backoff: f.cfg.FailureBackoff, lastCheck: time.Now()}
	r := f.newReader()
	defer r.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Since(l.lastCheck) >= f.cfg.LeaderCheck {
			if err := l.check(ctx); err != nil {
				return err
			}
		}
		if !l.resumed {
			pos, err := f.cfg.Handler.Resume(ctx)
			if err != nil {
				if err := l.outage(ctx, stageOf(err, StageCheckpoint), err); err != nil {
					return err
				}
				continue
			}
			l.after, l.resumed = pos, true
		}
		if err := l.checkRegression(ctx); err != nil {
			return err
		}
		if !l.resumed {
			continue // rewound: resume from what the handler saved
		}
		b, err := r.Next(ctx, l.after)
		if err != nil {
			if err := l.outage(ctx, StageRead, err); err != nil {
				return err
			}
			continue
		}
		if len(b.Events) == 0 {
			if err := l.idle(ctx); err != nil {
				return err
			}
			continue
		}
		if err := l.handle(ctx, b); err != nil {
			return err
		}
	}
}

// leading is the state of one spell of leadership.
type leading[T any] struct {
	f         *Follower[T]
	after     eventstore.Position // where the next read starts
	resumed   bool                // after holds the handler's position
	poll      time.Duration       // the next idle pause
	backoff   time.Duration       // the next outage's pause
	failures  int                 // consecutive outages
	lastCheck time.Time           // the lock was last found held (real time)
	// lastRegressionCheck is the last regression check (real time; zero:
	// check before the first read).
	lastRegressionCheck time.Time
}

// check checks the lock is still held.
func (l *leading[T]) check(ctx context.Context) error {
	if err := l.f.cfg.Leader.Check(ctx); err != nil {
		return err
	}
	l.lastCheck = time.Now()
	return nil
}

// idle lets the handler act on an idle log, then pauses for poll (cut
// short by Wake) and doubles it. It returns an error when lead must stop.
func (l *leading[T]) idle(ctx context.Context) error {
	if err := l.f.cfg.Handler.Idle(ctx); err != nil {
		l.resumed = false // read again from what the handler saved
		return l.outage(ctx, stageOf(err, StageIdle), err)
	}
	l.healthy(ctx)
	if !pause(ctx, l.poll, l.f.cfg.Wake) {
		return ctx.Err()
	}
	l.poll = min(l.poll*2, l.f.cfg.PollMax)
	return nil
}

// handle hands b to the handler and pauses as its answer says. It returns
// an error when lead must stop.
func (l *leading[T]) handle(ctx context.Context, b Batch[T]) error {
	cfg := &l.f.cfg
	b.lead = l.check
	next, err := cfg.Handler.Handle(ctx, b)
	var retry *retryError
	var reload *reloadError
	switch {
	case err == nil:
	case errors.Is(err, ErrLeadershipLost):
		return err
	case errors.As(err, &reload):
		cfg.Logger.InfoContext(ctx, "follow: checkpoint moved; resuming from it", "err", err)
		l.resumed = false
		return nil
	case errors.As(err, &retry):
	default:
		l.resumed = false // read again from what the handler saved
		return l.outage(ctx, stageOf(err, StageHandle), err)
	}
	if next != nil {
		l.after = next
		if e := eventAt(b.Events, next); e != nil {
			l.f.marks.note(e, time.Now(), l.f.cfg.markSpacing)
		}
	}
	l.healthy(ctx)
	l.poll = cfg.PollMin
	switch {
	case retry != nil:
		// An event failed and waits for its retry: the log waits behind
		// it, for as long as the handler's policy says.
		if !pause(ctx, retry.after, nil) {
			return ctx.Err()
		}
	case !b.Full:
		// Caught up: what comes next is a few events at a time; let them
		// gather for PollMin rather than read each on its own.
		if !pause(ctx, cfg.PollMin, cfg.Wake) {
			return ctx.Err()
		}
	}
	return nil
}

// outage records a failure and pauses; it returns an error when lead must
// stop (MaxFailures reached, the lock lost, or ctx ended).
func (l *leading[T]) outage(ctx context.Context, stage string, err error) error {
	cfg := &l.f.cfg
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrLeadershipLost) {
		return err
	}
	l.failures++
	l.lastRegressionCheck = time.Time{} // an outage may be a failover: check first thing after it
	l.f.noteFailure(stage, err, l.failures)
	if cfg.MaxFailures > 0 && l.failures >= cfg.MaxFailures {
		return fmt.Errorf("%d consecutive failures: %s: %w", l.failures, stage, err)
	}
	cfg.Logger.WarnContext(ctx, "follow: outage; retrying", "stage", stage, "err", err, "failures", l.failures, "backoff", l.backoff)
	if !pause(ctx, l.backoff, nil) {
		return ctx.Err()
	}
	l.backoff = min(l.backoff*2, cfg.MaxFailureBackoff)
	return nil
}

// healthy ends a streak of outages.
func (l *leading[T]) healthy(ctx context.Context) {
	if l.failures > 0 {
		l.f.cfg.Logger.InfoContext(ctx, "follow: recovered", "after_failures", l.failures)
	}
	l.failures, l.backoff = 0, l.f.cfg.FailureBackoff
	l.f.noteHealthy()
}

// CatchUp waits for the leadership (trying every LeaderRetry until ctx
// ends), handles batches until a read comes back short of BatchSize, and
// releases the leadership. It returns how many events it handled. It does
// not retry: the first outage, Retry or lost leadership is returned.
// Tools and benchmarks use it; services use Run.
func (f *Follower[T]) CatchUp(ctx context.Context) (int64, error) {
	defer f.cfg.Leader.Release(ctx)
	for {
		held, err := f.cfg.Leader.TryAcquire(ctx)
		if err != nil {
			return 0, err
		}
		if held {
			break
		}
		if !pause(ctx, f.cfg.LeaderRetry, nil) {
			return 0, ctx.Err()
		}
	}
	f.setLeading(true)
	defer f.setLeading(false)
	after, err := f.cfg.Handler.Resume(ctx)
	if err != nil {
		return 0, err
	}
	r := f.newReader()
	defer r.Close()
	var handled int64
	for {
		b, err := r.Next(ctx, after)
		if err != nil || len(b.Events) == 0 {
			return handled, err
		}
		b.lead = f.cfg.Leader.Check
		next, err := f.cfg.Handler.Handle(ctx, b)
		handled += countThrough(b.Events, next)
		if err != nil {
			return handled, err
		}
		if !b.Full {
			return handled, nil
		}
		after = next
	}
}

// eventAt returns the event of batch at pos, if there is one.
func eventAt(batch []eventstore.RecordedEvent, pos eventstore.Position) *eventstore.RecordedEvent {
	for i := len(batch) - 1; i >= 0; i-- {
		if c := batch[i].Position.Compare(pos); c == 0 {
			return &batch[i]
		} else if c < 0 {
			return nil
		}
	}
	return nil
}

// countThrough counts the events of batch up to and including next.
func countThrough(batch []eventstore.RecordedEvent, next eventstore.Position) int64 {
	if next == nil {
		return 0
	}
	var n int64
	for _, e := range batch {
		if e.Position.Compare(next) > 0 {
			break
		}
		n++
	}
	return n
}

func (f *Follower[T]) newReader() *Reader[T] {
	return NewReader(f.cfg.Store, f.cfg.BatchSize, f.cfg.Prepare, f.cfg.ReadAhead)
}

// pause waits d, or less if ctx ends (it then reports false) or wake fires.
func pause(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
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
