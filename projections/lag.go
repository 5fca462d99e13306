package projections

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"opledger/domain/codec"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// DefaultLagMaxEvents bounds how many events MeasureLag counts.
const DefaultLagMaxEvents = follow.DefaultLagMaxEvents

// Lag is how far a projection trails the log.
type Lag struct {
	// Checkpoint is the projection's checkpoint when measured.
	Checkpoint Checkpoint
	// Events counts events after the checkpoint, up to the bound; Capped
	// says there are more than that.
	Events int64
	Capped bool
	// Behind is now minus the time the ledger recorded the oldest event
	// not yet applied (its metadata's recorded_at: the ledger's clock, the
	// clock Now should come from), or the store's RecordedAt for an event
	// without one; 0 when caught up (never negative, whatever the clocks).
	// Both ends read one clock: a ledger whose clock was moved (serve
	// --test-clock) is not reported behind by the distance it moved.
	Behind time.Duration
}

// LagOptions says which projection to measure. Zero values take defaults.
type LagOptions struct {
	Schema string    // default DefaultSchema
	Name   string    // default DefaultName
	Now    time.Time // default time.Now(); the ledger's clock (see Lag.Behind)
	// MaxEvents bounds the count (default DefaultLagMaxEvents): counting
	// reads events through the port, so it costs what reading them costs.
	MaxEvents int
}

// MeasureLag reads the projection's checkpoint from db and compares it with
// the log in store (follow.MeasureLag, on the ledger's clock). It works over
// any store (counting by reading pages after the checkpoint); with one that
// is an eventstore.Header it skips the reads when the projection is caught
// up.
func MeasureLag(ctx context.Context, db Querier, store eventstore.Store, opts LagOptions) (Lag, error) {
	cp, err := ReadCheckpoint(ctx, db, store, opts.Schema, opts.Name)
	if err != nil {
		return Lag{}, fmt.Errorf("lag: %w", err)
	}
	lag, err := follow.MeasureLag(ctx, store, cp.Position, follow.LagOptions{
		Now: opts.Now, EventTime: codec.LedgerTime, MaxEvents: cmp.Or(opts.MaxEvents, DefaultLagMaxEvents),
	})
	if err != nil {
		return Lag{}, err
	}
	return Lag{Checkpoint: cp, Events: lag.Events, Capped: lag.Capped, Behind: lag.Behind}, nil
}

// Lag measures this projector's projection (see MeasureLag) with its
// configured clock and the default bound.
func (p *Projector) Lag(ctx context.Context) (Lag, error) {
	return MeasureLag(ctx, p.cfg.Pool, p.cfg.Store, LagOptions{Schema: p.cfg.Schema, Name: p.cfg.Name, Now: p.cfg.Clock.Now()})
}
