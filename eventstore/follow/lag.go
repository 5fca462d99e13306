package follow

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"opledger/eventstore"
)

// DefaultLagMaxEvents bounds how many events MeasureLag counts.
const DefaultLagMaxEvents = 10_000

// lagPage is the read size MeasureLag counts with.
const lagPage = 1000

// Lag is how far a checkpoint trails the log.
type Lag struct {
	// Events counts events after the checkpoint, up to the bound; Capped
	// says there are more than that.
	Events int64
	Capped bool
	// Behind is Now minus EventTime of the oldest event after the
	// checkpoint; 0 when caught up (never negative, whatever the clocks).
	Behind time.Duration
}

// LagOptions says how to measure. Zero values take defaults.
type LagOptions struct {
	// Now is the end Behind is measured to (default time.Now()).
	Now time.Time
	// EventTime is when an event was recorded, on the clock Now reads
	// (default the store's RecordedAt). Both ends must read one clock: the
	// roles pass the ledger's (codec.LedgerTime and the ledger's clock), so
	// that a ledger whose clock was moved (serve --test-clock) is not
	// reported behind by the distance it moved.
	EventTime func(eventstore.RecordedEvent) time.Time
	// MaxEvents bounds the count (default DefaultLagMaxEvents): counting
	// reads events through the port, so it costs what reading them costs.
	MaxEvents int
}

// MeasureLag counts the events of store after the checkpoint after (nil:
// the start of the log), up to opts.MaxEvents, and how old the first is. It
// works over any store, by reading pages after the checkpoint (at most
// MaxEvents/1000 + 2 reads); a store that is an eventstore.Header answers
// "caught up" without reading an event.
func MeasureLag(ctx context.Context, store eventstore.Store, after eventstore.Position, opts LagOptions) (Lag, error) {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	if opts.EventTime == nil {
		opts.EventTime = func(e eventstore.RecordedEvent) time.Time { return e.RecordedAt }
	}
	maxEvents := int64(cmp.Or(opts.MaxEvents, DefaultLagMaxEvents))
	var lag Lag
	if h, ok := store.(eventstore.Header); ok {
		head, err := h.Head(ctx)
		if err != nil {
			return Lag{}, fmt.Errorf("lag: head: %w", err)
		}
		if head == nil || head.Compare(after) <= 0 {
			return lag, nil
		}
	}
	from := positionText(after)
	for lag.Events < maxEvents {
		want := int(min(lagPage, maxEvents-lag.Events))
		page, err := store.ReadAll(ctx, after, want)
		if err != nil {
			return Lag{}, fmt.Errorf("lag: read log after %q: %w", from, err)
		}
		if len(page) > 0 && lag.Events == 0 {
			lag.Behind = max(0, opts.Now.Sub(opts.EventTime(page[0])))
		}
		lag.Events += int64(len(page))
		if len(page) < want {
			return lag, nil
		}
		after = page[len(page)-1].Position
	}
	more, err := store.ReadAll(ctx, after, 1)
	if err != nil {
		return Lag{}, fmt.Errorf("lag: read log after %q: %w", from, err)
	}
	lag.Capped = len(more) > 0
	return lag, nil
}
