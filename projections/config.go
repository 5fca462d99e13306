package projections

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/domain/clock"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// Projector defaults and bounds.
const (
	// DefaultBatchSize is how many events one transaction folds at most. A
	// batch is full only while catching up; there each batch also pays a
	// fixed cost (a dozen round trips and a commit, about 7 ms on the
	// benchmark machine), which 5000 events amortize: catch-up ran at 34k
	// events/s with 1000, 44k with 5000 (scripts/bench-projections.sh).
	DefaultBatchSize = 5000
	// MaxBatchSize bounds BatchSize: a batch is one transaction and its rows
	// one JSON document per table, which must stay small.
	MaxBatchSize = 10_000
	// DefaultApplicationName is the application_name of the leader lock's
	// connection (pg_stat_activity shows it).
	DefaultApplicationName = "opledger-projector"
)

// Config configures a Projector. Zero values take defaults.
type Config struct {
	// Pool reaches the database holding the read models. Required. The
	// leader lock uses one more connection, opened with the pool's
	// configuration outside the pool.
	Pool *pgxpool.Pool
	// Store is the event log the projector follows. Required.
	Store eventstore.Store
	// Schema holds the read models (default DefaultSchema).
	Schema string
	// Name names the projection's checkpoint and locks (default DefaultName).
	Name string
	// BatchSize bounds the events read and folded per transaction (default
	// DefaultBatchSize, at most MaxBatchSize).
	BatchSize int
	// MinBackoff is the first pause after an empty read or a failure
	// (default 10ms); it doubles on each further one up to MaxBackoff
	// (default 1s). A full batch is followed by the next read at once.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// LockRetryInterval is how often a projector that does not hold the
	// leader lock tries to take it (default 1s): the longest a takeover
	// waits after the leader's session ends.
	LockRetryInterval time.Duration
	// Wake, when set, cuts an idle pause short (a coalesced notifier outside
	// the write path signals appends).
	Wake <-chan struct{}
	// MaxConsecutiveFailures bounds failed batches in a row before Run
	// returns the last failure (default 0: retry for as long as the context
	// lives, each retry after the backoff).
	MaxConsecutiveFailures int
	// ApplicationName is the leader lock connection's application_name
	// (default DefaultApplicationName).
	ApplicationName string
	// Clock stamps checkpoint updates and failures (default clock.System).
	Clock clock.Clock
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Regressions, when set, is told when the log went back under the
	// checkpoint (a failover lost the last commits); the projector rewinds
	// to what the log still holds either way (follow.Rewinder).
	Regressions eventstore.RegressionObserver
	// SetAside keeps the events the projector cannot decode or fold (role
	// projector, item = the event id). Default: a setaside.Memory, with a
	// warning logged (failures are then forgotten on restart, so a failing
	// event gets Policy.MaxAttempts tries again per process). Serve passes
	// the PostgreSQL store.
	SetAside setaside.Store
	// Policy bounds the tries of an event that cannot be folded: after each
	// failure the projector pauses Policy.Delay (real time) before trying it
	// again; at Policy.MaxAttempts the event is set aside and skipped (zero
	// fields: setaside.DefaultPolicy).
	Policy setaside.Policy
	// OnItemFailure, when set, is called with every failure recorded, the
	// item as it now stands. For metrics; it must be quick.
	OnItemFailure func(setaside.Item)
}

func (c *Config) setDefaults() {
	c.Schema = defaultSchema(c.Schema)
	c.Name = defaultName(c.Name)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.MinBackoff = cmp.Or(c.MinBackoff, 10*time.Millisecond)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, time.Second)
	c.LockRetryInterval = cmp.Or(c.LockRetryInterval, time.Second)
	c.ApplicationName = cmp.Or(c.ApplicationName, DefaultApplicationName)
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Policy = c.Policy.WithDefaults()
}

func (c *Config) validate() error {
	switch {
	case c.Pool == nil:
		return errors.New("projector config: Pool is required")
	case c.Store == nil:
		return errors.New("projector config: Store is required")
	case c.BatchSize < 1 || c.BatchSize > MaxBatchSize:
		return fmt.Errorf("projector config: BatchSize is %d, must be 1..%d", c.BatchSize, MaxBatchSize)
	case c.MinBackoff <= 0 || c.MaxBackoff < c.MinBackoff:
		return fmt.Errorf("projector config: backoff must satisfy 0 < MinBackoff (%s) <= MaxBackoff (%s)", c.MinBackoff, c.MaxBackoff)
	case c.LockRetryInterval <= 0:
		return fmt.Errorf("projector config: LockRetryInterval is %s, must be positive", c.LockRetryInterval)
	case c.MaxConsecutiveFailures < 0:
		return fmt.Errorf("projector config: MaxConsecutiveFailures is %d, must not be negative", c.MaxConsecutiveFailures)
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("projector config: %w", err)
	}
	return validateSchemaName(c.Schema)
}
