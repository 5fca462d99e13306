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
	"opledger/domain/setaside"
)

// SweeperConfig configures a Sweeper. Zero values take defaults.
type SweeperConfig struct {
	Ledger *ledger.Handler // required
	Index  Index           // required
	Clock  clock.Clock     // default: the ledger's
	Logger *slog.Logger
	// BatchSize bounds the executions examined per sweep (default 100, at
	// most setaside.MaxHeldBatch).
	BatchSize int
	// Interval is the pause between sweeps in Run (default 5s).
	Interval time.Duration
	// SetAside keeps the executions whose lapse keeps failing (default: a
	// setaside.Memory, with a warning logged: failures are then forgotten
	// on restart). Serve passes the PostgreSQL store.
	SetAside setaside.Store
	// Policy bounds the retries of a failing execution (zero fields:
	// setaside.DefaultPolicy).
	Policy setaside.Policy
	// OnItemFailure, when set, is called with every failure recorded, the
	// item as it now stands (it.SetAside: this failure set it aside, or it
	// was already). For metrics; it must be quick.
	OnItemFailure func(setaside.Item)
}

// Sweeper moves executions whose lease expired to Unknown (LeaseLapsed,
// epoch+1). It acts only on the lease's expiry by the clock, never on a
// duplicate delivery.
type Sweeper struct {
	cfg   SweeperConfig
	items *items
	walk  walker
}

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
	if cfg.BatchSize < 1 || cfg.BatchSize > setaside.MaxHeldBatch || cfg.Interval <= 0 {
		return nil, fmt.Errorf("sweeper: config: BatchSize must be 1..%d and Interval positive", setaside.MaxHeldBatch)
	}
	items, err := newItems(setaside.RoleSweeper, cfg.SetAside, cfg.Policy, cfg.Clock, cfg.Logger, cfg.OnItemFailure)
	if err != nil {
		return nil, err
	}
	return &Sweeper{cfg: cfg, items: items, walk: walker{batch: cfg.BatchSize}}, nil
}

// SweepOnce examines up to BatchSize expired leases, continuing the walk
// where the last sweep stopped, and returns how many it lapsed. A candidate
// whose lease was renewed meanwhile, or that ended, is skipped. A candidate
// that fails otherwise is recorded (retried after a backoff, set aside
// after Policy.MaxAttempts) and the sweep goes on; candidates held so are
// not examined. It returns an error only for an outage: the index cannot be
// read, or the store is unreachable (see items.process). Not safe for
// concurrent use on one Sweeper.
func (s *Sweeper) SweepOnce(ctx context.Context) (int, error) {
	now := s.cfg.Clock.Now()
	cands, end, err := s.walk.next(ctx, s.items, func(ctx context.Context, after Cursor, limit int) ([]ExecutionRef, error) {
		return s.cfg.Index.ExpiredLeases(ctx, now, after, limit)
	})
	if err != nil {
		return 0, fmt.Errorf("sweep: find expired leases: %w", err)
	}
	lapsed := 0
	handled, err := s.items.process(ctx, cands, func(ctx context.Context, ref ExecutionRef) error {
		ev, err := s.cfg.Ledger.LapseLease(ctx, ref.OperationID, domain.LapseLease{ExecutionID: ref.ExecutionID},
			ledger.Cause{Actor: "sweeper", CausationID: "sweep"})
		var refusal *domain.Refusal
		switch {
		case err == nil:
			lapsed++
			s.cfg.Logger.InfoContext(ctx, "lease lapsed: execution is Unknown", "operation_id", ref.OperationID,
				"execution_id", ref.ExecutionID, "from_epoch", ev.FromEpoch, "to_epoch", ev.ToEpoch)
			return nil
		case errors.As(err, &refusal) && sweepSkips(refusal.Reason):
			s.cfg.Logger.DebugContext(ctx, "sweep candidate skipped", "execution_id", ref.ExecutionID, "reason", refusal.Reason)
			return nil
		}
		return err
	})
	s.walk.commit(cands, handled, end)
	if err != nil {
		return lapsed, fmt.Errorf("sweep: %w", err)
	}
	return lapsed, nil
}

// sweepSkips reports whether a refused lapse means the candidate needs no
// sweeping: its lease was renewed (or is not expired by the ledger's
// clock), or the execution is no longer Executing. Any other refusal is
// unexpected and counts as the candidate's failure.
func sweepSkips(r domain.Reason) bool {
	switch r {
	case domain.ReasonLeaseActive, domain.ReasonExecutionNotExecuting:
		return true
	}
	return false
}

// Run sweeps every Interval until ctx ends. Outages are logged and retried
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
