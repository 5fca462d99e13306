package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
)

// SweeperConfig configures a Sweeper. Zero values take defaults.
type SweeperConfig struct {
	Ledger *ledger.Handler // required
	Index  Index           // required
	Clock  clock.Clock     // default: the ledger's
	Logger *slog.Logger
	// BatchSize bounds the executions lapsed per sweep (default 100).
	BatchSize int
	// Interval is the pause between sweeps in Run (default 5s).
	Interval time.Duration
}

// Sweeper moves executions whose lease expired to Unknown (LeaseLapsed,
// epoch+1). It acts only on the lease's expiry by the clock, never on a
// duplicate delivery.
type Sweeper struct{ cfg SweeperConfig }

// NewSweeper validates cfg.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if cfg.Ledger == nil || cfg.Index == nil {
		return nil, errors.New("sweeper: config: Ledger and Index are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Ledger.Clock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 100)
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	if cfg.BatchSize < 1 || cfg.Interval <= 0 {
		return nil, errors.New("sweeper: config: BatchSize and Interval must be positive")
	}
	return &Sweeper{cfg: cfg}, nil
}

// SweepOnce lapses up to BatchSize expired leases and returns how many it
// lapsed. A candidate whose lease was renewed meanwhile, or that ended, is
// skipped. It stops at the first store failure.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	now := s.cfg.Clock.Now()
	refs, err := s.cfg.Index.ExpiredLeases(ctx, now, s.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("sweep: find expired leases: %w", err)
	}
	lapsed := 0
	for _, ref := range refs {
		ev, err := s.cfg.Ledger.LapseLease(ctx, ref.OperationID, domain.LapseLease{ExecutionID: ref.ExecutionID},
			ledger.Cause{Actor: "sweeper", CausationID: "sweep"})
		var refusal *domain.Refusal
		switch {
		case err == nil:
			lapsed++
			s.cfg.Logger.InfoContext(ctx, "lease lapsed: execution is Unknown", "operation_id", ref.OperationID,
				"execution_id", ref.ExecutionID, "from_epoch", ev.FromEpoch, "to_epoch", ev.ToEpoch)
		case errors.As(err, &refusal):
			s.cfg.Logger.DebugContext(ctx, "sweep candidate skipped", "execution_id", ref.ExecutionID, "reason", refusal.Reason)
		default:
			return lapsed, fmt.Errorf("sweep %s: %w", ref.ExecutionID, err)
		}
	}
	return lapsed, nil
}

// Run sweeps every Interval until ctx ends. Failures are logged and retried
// at the next tick.
func (s *Sweeper) Run(ctx context.Context) error {
	return runEvery(ctx, s.cfg.Interval, func(ctx context.Context) {
		if _, err := s.SweepOnce(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.WarnContext(ctx, "sweep failed", "err", err)
		}
	})
}

// runEvery calls f at once and then every interval until ctx ends.
func runEvery(ctx context.Context, interval time.Duration, f func(context.Context)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
