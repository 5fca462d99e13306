package follow

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opledger/eventstore"
)

// MaxBatchSize bounds Config.BatchSize: a follower holds at most two
// batches (one handled, one read ahead).
const MaxBatchSize = 10_000

// Config configures a Follower. Zero values take defaults.
type Config[T any] struct {
	// Name names the follower in logs and errors (a relay's, a
	// projection's name). Required.
	Name string
	// Store is the log followed. Required.
	Store eventstore.Store
	// Handler is what the follower does with the log. Required.
	Handler Handler[T]
	// Prepare, when set, turns a batch's events into what Handle needs
	// (Batch.Prepared) on the reading goroutine: with ReadAhead, while the
	// previous batch is handled.
	Prepare func([]eventstore.RecordedEvent) T
	// ReadAhead reads (and prepares) the next batch while a full one is
	// handled: at most one read in flight.
	ReadAhead bool
	// Leader is the lock the follower leads under (default: none, it always
	// leads).
	Leader Leadership
	// LeaderRetry is how often a standby tries to take the lock, and how
	// long a follower that lost it waits before trying again, so that a
	// waiting standby takes over first (default 1s). LeaderCheck is how
	// often an idle leader checks it still holds the lock (default 1s); a
	// Handler checks right before its effects (Batch.Lead).
	LeaderRetry, LeaderCheck time.Duration
	// BatchSize bounds the events read at once (default 500, at most
	// MaxBatchSize).
	BatchSize int
	// PollMin and PollMax bound the pause between empty reads (defaults
	// 10ms, 1s): it starts at PollMin and doubles per empty read. After a
	// batch that was not full the follower pauses PollMin, so that what
	// comes next gathers rather than being read an event at a time; after a
	// full one it reads again at once.
	PollMin, PollMax time.Duration
	// Wake, when set, cuts a poll pause short (a coalesced notifier outside
	// the write path signals appends).
	Wake <-chan struct{}
	// FailureBackoff is the first pause after an outage (default 100ms),
	// doubled per consecutive outage up to MaxFailureBackoff (default 30
	// times FailureBackoff).
	FailureBackoff, MaxFailureBackoff time.Duration
	// MaxFailures, when positive, bounds consecutive outages: Run then
	// returns the last error. Zero (the default) retries for as long as the
	// context lives: an outage is reported in Status, not by stopping.
	MaxFailures int
	// Regressions, when set, is told of a log that went back under the
	// follower's position (regression.go), with Cache set to
	// RegressionCache (the role's name in LogRegressed: relay_checkpoint,
	// projector_checkpoint, ...). RegressionCheck bounds how often an idle
	// follower checks (default DefaultRegressionCheck); the follower
	// rewinds whether or not anyone is told.
	Regressions     eventstore.RegressionObserver
	RegressionCache string
	RegressionCheck time.Duration
	// markSpacing spaces the remembered marks (defaultMarkSpacing; the
	// tests set it).
	markSpacing time.Duration
	// Now stamps Status.Since (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()); the follower adds nothing to it, so
	// pass one that names the role.
	Logger *slog.Logger
}

func (c *Config[T]) setDefaults() {
	c.LeaderRetry = cmp.Or(c.LeaderRetry, time.Second)
	c.LeaderCheck = cmp.Or(c.LeaderCheck, time.Second)
	c.BatchSize = cmp.Or(c.BatchSize, 500)
	c.PollMin = cmp.Or(c.PollMin, 10*time.Millisecond)
	c.PollMax = cmp.Or(c.PollMax, time.Second)
	c.FailureBackoff = cmp.Or(c.FailureBackoff, 100*time.Millisecond)
	c.RegressionCheck = cmp.Or(c.RegressionCheck, DefaultRegressionCheck)
	c.RegressionCache = cmp.Or(c.RegressionCache, c.Name)
	c.markSpacing = cmp.Or(c.markSpacing, defaultMarkSpacing)
	c.MaxFailureBackoff = cmp.Or(c.MaxFailureBackoff, 30*c.FailureBackoff)
	if c.Leader == nil {
		c.Leader = soleLeader{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config[T]) validate() error {
	var errs []error
	if c.Name == "" || c.Store == nil || c.Handler == nil {
		errs = append(errs, errors.New("Name, Store and Handler are required"))
	}
	if c.BatchSize < 1 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("batch size %d must be in [1, %d]", c.BatchSize, MaxBatchSize))
	}
	if c.PollMin <= 0 || c.PollMax < c.PollMin {
		errs = append(errs, fmt.Errorf("poll pauses must satisfy 0 < PollMin (%s) <= PollMax (%s)", c.PollMin, c.PollMax))
	}
	if c.FailureBackoff <= 0 || c.MaxFailureBackoff < c.FailureBackoff {
		errs = append(errs, fmt.Errorf("back-off must satisfy 0 < FailureBackoff (%s) <= MaxFailureBackoff (%s)", c.FailureBackoff, c.MaxFailureBackoff))
	}
	if c.LeaderRetry <= 0 || c.LeaderCheck <= 0 {
		errs = append(errs, errors.New("LeaderRetry and LeaderCheck must be positive"))
	}
	if c.MaxFailures < 0 {
		errs = append(errs, fmt.Errorf("MaxFailures is %d, must not be negative", c.MaxFailures))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("follow: config %q: %w", c.Name, err)
	}
	return nil
}
