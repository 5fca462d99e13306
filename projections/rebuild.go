package projections

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/domain/clock"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// Rebuild defaults.
const (
	// DefaultSwapLockTimeout bounds how long a swap waits for its locks:
	// the live projector's batch in flight and queries reading the live
	// tables (while it waits, new queries queue behind it).
	DefaultSwapLockTimeout = 30 * time.Second
	// DefaultMaxSwapCatchUp bounds the events a swap folds while it holds
	// the projection's apply lock; the live projector folds the rest.
	DefaultMaxSwapCatchUp = 100_000
)

// RebuildOptions configures Rebuild. Zero values take defaults.
type RebuildOptions struct {
	// ToPosition, when set, is the position (the store's Position.String())
	// of the last event to fold; later events are left out.
	ToPosition string
	// AsOf, when set, folds only the events the store recorded (RecordedAt)
	// at or before it.
	AsOf time.Time
	// Schema is the schema to build into; it must not exist or must be
	// empty. Default: <Live>_rebuild_<UTC yyyymmddhhmmss> (by Clock).
	Schema string
	// Swap makes the rebuild the live read models: one transaction renames
	// the live schema away, renames Schema to Live and drops the old one.
	// Not allowed with ToPosition or AsOf: a past view never goes live.
	Swap bool
	// Live is the live read models' schema (default DefaultSchema).
	Live string
	// Name is the projection's name (default DefaultName); the rebuild's
	// checkpoint carries it, so after a swap the live projector resumes
	// from it.
	Name string
	// BatchSize bounds the events folded per transaction (default
	// DefaultBatchSize, at most MaxBatchSize).
	BatchSize int
	// SwapLockTimeout (default DefaultSwapLockTimeout) and MaxSwapCatchUp
	// (default DefaultMaxSwapCatchUp) bound the swap.
	SwapLockTimeout time.Duration
	MaxSwapCatchUp  int
	// Clock names the default schema and stamps checkpoints (default
	// clock.System).
	Clock clock.Clock
}

func (o *RebuildOptions) setDefaults() {
	if o.Clock == nil {
		o.Clock = clock.System{}
	}
	o.Live = defaultSchema(o.Live)
	o.Name = defaultName(o.Name)
	if o.Schema == "" {
		suffix := "_rebuild_" + o.Clock.Now().UTC().Format("20060102150405")
		o.Schema = o.Live[:min(len(o.Live), maxSchemaNameLen-len(suffix))] + suffix
	}
	o.BatchSize = cmp.Or(o.BatchSize, DefaultBatchSize)
	o.SwapLockTimeout = cmp.Or(o.SwapLockTimeout, DefaultSwapLockTimeout)
	o.MaxSwapCatchUp = cmp.Or(o.MaxSwapCatchUp, DefaultMaxSwapCatchUp)
}

func (o *RebuildOptions) validate() error {
	if o.Swap && (o.ToPosition != "" || !o.AsOf.IsZero()) {
		return errors.New("rebuild: Swap with ToPosition or AsOf: a past view never goes live")
	}
	for _, s := range []string{o.Live, o.Schema} {
		if err := validateSchemaName(s); err != nil {
			return err
		}
	}
	switch {
	case o.Schema == o.Live:
		return fmt.Errorf("rebuild: target schema %q is the live schema", o.Schema)
	case o.BatchSize < 1 || o.BatchSize > MaxBatchSize:
		return fmt.Errorf("rebuild: BatchSize is %d, must be 1..%d", o.BatchSize, MaxBatchSize)
	case o.SwapLockTimeout <= 0 || o.MaxSwapCatchUp < 0:
		return errors.New("rebuild: SwapLockTimeout must be positive and MaxSwapCatchUp not negative")
	}
	return nil
}

// RebuildResult says what Rebuild built.
type RebuildResult struct {
	// Schema holds the rebuilt read models: Live after a swap.
	Schema string
	// Checkpoint is the position the rebuild folded through.
	Checkpoint Checkpoint
	// Swapped is true when the rebuild went live.
	Swapped bool
	// Skipped counts the events the rebuild could not decode or fold and
	// skipped (listed in the schema's skipped_events).
	Skipped int
	// Read counts the events the rebuild read up to where it stopped;
	// Folded those it folded into the schema. With AsOf, the events read
	// but recorded after it are left out: Read - Folded - Skipped of them.
	// (A swap's catch-up is counted too.)
	Read, Folded int
}

// Rebuild folds the log from its start into a fresh schema (opts.Schema,
// migrated here), in batches of one transaction each, up to opts.ToPosition
// or the log's end as it stood when Rebuild started (its Head, for stores
// that have one; else until a read comes back short), leaving out events
// recorded after opts.AsOf.
//
// Without Swap the schema stays beside the live one: the auditors' view of
// the read models as of a past point, which no projector moves on.
//
// With Swap, Rebuild then takes the projection's apply lock exclusively (no
// live batch is in flight and none starts), folds what was appended
// meanwhile (at most MaxSwapCatchUp events), and in the same transaction
// renames the live schema away, renames the rebuild to Live and drops the
// old schema. Queries see the old tables or the new, never a mix; the live
// projector finds the rebuild's checkpoint and continues from it.
//
// An event that cannot be decoded or folded is skipped at once (a rebuild
// does not retry): listed in the schema's skipped_events, its operation
// marked projection_incomplete, and counted in RebuildResult.Skipped.
//
// A failed Rebuild leaves opts.Schema as it got (for inspection); drop it
// before trying again under the same name.
func Rebuild(ctx context.Context, db DB, store eventstore.Store, opts RebuildOptions) (RebuildResult, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return RebuildResult{}, err
	}
	op := "rebuild " + opts.Schema
	var stop eventstore.Position
	if opts.ToPosition != "" {
		p, err := store.ParsePosition(opts.ToPosition)
		if err != nil {
			return RebuildResult{}, fmt.Errorf("%s: ToPosition: %w", op, err)
		}
		stop = p
	} else if h, ok := store.(eventstore.Header); ok {
		p, err := h.Head(ctx)
		if err != nil {
			return RebuildResult{}, fmt.Errorf("%s: head: %w", op, err)
		}
		stop = p
	}
	if err := requireEmptySchema(ctx, db, opts.Schema); err != nil {
		return RebuildResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := Migrate(ctx, db, opts.Schema); err != nil {
		return RebuildResult{}, fmt.Errorf("%s: %w", op, err)
	}
	r := &rebuilder{opts: opts, applier: newApplier(store, opts.Schema, opts.Name), store: store}
	if err := ensureCheckpoint(ctx, db, r.applier.sql, opts.Name, opts.Clock.Now()); err != nil {
		return RebuildResult{}, fmt.Errorf("%s: %w", op, err)
	}
	cp, err := r.foldUntil(ctx, db, Checkpoint{}, stop, -1)
	if err != nil {
		return RebuildResult{}, fmt.Errorf("%s: %w", op, err)
	}
	if !opts.Swap {
		return RebuildResult{Schema: opts.Schema, Checkpoint: cp, Skipped: r.skipped, Read: r.read, Folded: r.folded}, nil
	}
	cp, err = r.swap(ctx, db, cp)
	if err != nil {
		return RebuildResult{}, fmt.Errorf("%s: swap into %s: %w", op, opts.Live, err)
	}
	return RebuildResult{Schema: opts.Live, Checkpoint: cp, Swapped: true, Skipped: r.skipped, Read: r.read, Folded: r.folded}, nil
}

type rebuilder struct {
	opts    RebuildOptions
	applier *applier
	store   eventstore.Store
	skipped int // events skipped so far (see applySkipping)
	read    int // events read up to the stop
	folded  int // events folded (read, kept by AsOf, not skipped)
}

// foldUntil folds batches after cp, each in a transaction begun on db, until
// a read comes back short, the batch reaches stop (nil: no stop), or
// maxEvents were read (negative: no bound).
func (r *rebuilder) foldUntil(ctx context.Context, db Beginner, cp Checkpoint, stop eventstore.Position, maxEvents int) (Checkpoint, error) {
	size := r.opts.BatchSize
	if maxEvents >= 0 {
		size = max(1, min(size, maxEvents))
	}
	reader := follow.NewReader(r.store, size, decodeParallel, true)
	defer reader.Close()
	for read := 0; maxEvents < 0 || read < maxEvents; {
		b, err := reader.Next(ctx, cp.Position)
		if err != nil {
			return cp, err
		}
		events, decoded := b.Events, b.Prepared
		read += len(events)
		short := len(events) < size
		if stop != nil {
			for i, e := range events {
				if e.Position.Compare(stop) > 0 {
					events, decoded, short = events[:i], decoded[:i], true
					break
				}
			}
		}
		if len(events) == 0 {
			return cp, nil
		}
		through := events[len(events)-1].Position
		r.read += len(events)
		if !r.opts.AsOf.IsZero() {
			kept := make([]decodedEvent, 0, len(decoded))
			for _, d := range decoded {
				if !d.rec.RecordedAt.After(r.opts.AsOf) {
					kept = append(kept, d)
				}
			}
			decoded = kept
		}
		skippedBefore := r.skipped
		cp, err = r.applySkipping(ctx, db, cp, decoded, through)
		if err != nil {
			return cp, err
		}
		r.folded += len(decoded) - (r.skipped - skippedBefore)
		if short {
			return cp, nil
		}
	}
	return cp, nil
}

// applySkipping applies one batch, skipping at once every event that cannot
// be decoded or folded: a rebuild is a tool run over the log as it is, with
// no one to retry for. Each skip is listed in the rebuilt schema's
// skipped_events and marks its operation incomplete, as the live projector
// does once it sets an event aside.
func (r *rebuilder) applySkipping(ctx context.Context, db Beginner, cp Checkpoint, decoded []decodedEvent, through eventstore.Position) (Checkpoint, error) {
	skips := skipSet{}
	for range len(decoded) + 1 { // bounded: each pass either ends or skips one more event of the batch
		next, skipped, err := r.applier.applyInTx(ctx, db, cp, decoded, through, r.opts.Clock.Now(), skips)
		ee, isEvent := asEventError(err)
		if !isEvent {
			r.skipped += len(skipped)
			return next, err
		}
		skips[ee.id] = skipReason{reason: ee.reason, detail: ee.err.Error()}
	}
	return cp, fmt.Errorf("a batch of %d events failed on more events than it holds", len(decoded))
}

// requireEmptySchema fails unless schema does not exist or holds nothing.
func requireEmptySchema(ctx context.Context, q Querier, schema string) error {
	var objects int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`, schema).Scan(&objects)
	if err != nil {
		return fmt.Errorf("inspect schema %s: %w", schema, err)
	}
	if objects > 0 {
		return fmt.Errorf("schema %s is not empty (%d relations): rebuild into a fresh one", schema, objects)
	}
	return nil
}
