package projections

import (
	"context"
	"fmt"
	"strconv"

	"opledger/eventstore"
)

// swap makes the rebuild live in one transaction: it takes the apply lock of
// the live projection exclusively (waiting for a live batch in flight, and
// holding off the next), folds what was appended since the rebuild's last
// batch (bounded by MaxSwapCatchUp), renames the live schema away, renames
// the rebuild to Live and drops the old schema. Every wait is bounded by
// SwapLockTimeout.
func (r *rebuilder) swap(ctx context.Context, db Beginner, cp Checkpoint) (_ Checkpoint, err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return cp, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			rollback(ctx, tx)
		}
	}()
	timeout := strconv.FormatInt(r.opts.SwapLockTimeout.Milliseconds(), 10) + "ms"
	if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true)`, timeout); err != nil {
		return cp, fmt.Errorf("set lock timeout: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, applyLockKey(r.opts.Live, r.opts.Name)); err != nil {
		return cp, fmt.Errorf("apply lock of %s: %w", r.opts.Live, err)
	}
	// Nested transactions of tx are savepoints: the catch-up commits with
	// the swap or not at all.
	var noStop eventstore.Position
	cp, err = r.foldUntil(ctx, tx, cp, noStop, r.opts.MaxSwapCatchUp)
	if err != nil {
		return cp, fmt.Errorf("catch up: %w", err)
	}
	var liveExists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, r.opts.Live).Scan(&liveExists); err != nil {
		return cp, fmt.Errorf("inspect %s: %w", r.opts.Live, err)
	}
	live, rebuilt := quoteSchema(r.opts.Live), quoteSchema(r.opts.Schema)
	// The old schema lives only inside this transaction; its name need
	// only be free now.
	old := quoteSchema("projections_replaced_" + strconv.FormatInt(r.opts.Clock.Now().UnixNano(), 36))
	sql := `ALTER SCHEMA ` + rebuilt + ` RENAME TO ` + live
	if liveExists {
		sql = `ALTER SCHEMA ` + live + ` RENAME TO ` + old + `;
` + sql + `;
DROP SCHEMA ` + old + ` CASCADE`
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return cp, fmt.Errorf("rename schemas: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return cp, fmt.Errorf("commit: %w", err)
	}
	return cp, nil
}
