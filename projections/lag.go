package projections

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"opledger/domain/codec"
	"opledger/eventstore"
)

// DefaultLagMaxEvents bounds how many events MeasureLag counts.
const DefaultLagMaxEvents = 10_000

// lagPage is the read size MeasureLag counts with.
const lagPage = 1000

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
// the log in store. It works over any store (counting by reading pages
// after the checkpoint); with one that has a Head it skips the reads when
// the projection is caught up.
func MeasureLag(ctx context.Context, db Querier, store eventstore.Store, opts LagOptions) (Lag, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	opts.MaxEvents = cmp.Or(opts.MaxEvents, DefaultLagMaxEvents)
	cp, err := ReadCheckpoint(ctx, db, store, opts.Schema, opts.Name)
	if err != nil {
		return Lag{}, fmt.Errorf("lag: %w", err)
	}
	lag := Lag{Checkpoint: cp}
	if h, ok := store.(header); ok {
		head, err := h.Head(ctx)
		if err != nil {
			return Lag{}, fmt.Errorf("lag: head: %w", err)
		}
		if head == nil || head.Compare(cp.Position) <= 0 {
			return lag, nil
		}
	}
	after := cp.Position
	for {
		want := min(lagPage, opts.MaxEvents-int(lag.Events))
		if want <= 0 {
			more, err := store.ReadAll(ctx, after, 1)
			if err != nil {
				return Lag{}, fmt.Errorf("lag: read log after %q: %w", cp.Text, err)
			}
			lag.Capped = len(more) > 0
			return lag, nil
		}
		page, err := store.ReadAll(ctx, after, want)
		if err != nil {
			return Lag{}, fmt.Errorf("lag: read log after %q: %w", cp.Text, err)
		}
		if len(page) > 0 && lag.Events == 0 {
			lag.Behind = max(0, opts.Now.Sub(ledgerTime(page[0])))
		}
		lag.Events += int64(len(page))
		if len(page) < want {
			return lag, nil
		}
		after = page[len(page)-1].Position
	}
}

// Lag measures this projector's projection (see MeasureLag) with its
// configured clock and the default bound.
func (p *Projector) Lag(ctx context.Context) (Lag, error) {
	return MeasureLag(ctx, p.cfg.Pool, p.cfg.Store, LagOptions{Schema: p.cfg.Schema, Name: p.cfg.Name, Now: p.cfg.Clock.Now()})
}

// ledgerTime is when the ledger recorded e, by its own clock (metadata
// recorded_at), else when the store did.
func ledgerTime(e eventstore.RecordedEvent) time.Time {
	if m, err := codec.DecodeMetadata(e.Metadata); err == nil && !m.RecordedAt.IsZero() {
		return m.RecordedAt
	}
	return e.RecordedAt
}
