package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"opledger/domain"
	"opledger/eventstore"
)

// errRowExists means a row the batch created (and so did not load) is in
// the table already: the batch is applied again loading every row it
// touches, which makes re-applied events no-ops and real duplicates (an
// operation requested twice) errors.
var errRowExists = errors.New("a row the batch creates exists already")

// applier folds batches of events into one schema's read models. It holds
// no state between batches: the checkpoint row is the state.
type applier struct {
	store  eventstore.Store
	schema string
	name   string
	sql    statements
	// beforeCommit, when set (tests only), runs after a batch's rows and
	// checkpoint are written and before the commit.
	beforeCommit func(ctx context.Context, tx pgx.Tx) error
}

func newApplier(store eventstore.Store, schema, name string) *applier {
	return &applier{store: store, schema: schema, name: name, sql: newStatements(schema)}
}

// applyInTx applies one batch in a transaction begun on db (a pool, or a
// transaction: then a savepoint) and commits it, skipping the events in
// skips (see applyBatch). A batch that found a row it meant to create is
// applied again, in a new transaction, loading every row. It returns the
// new checkpoint and the events it skipped.
func (a *applier) applyInTx(ctx context.Context, db Beginner, from Checkpoint, events []decodedEvent, through eventstore.Position, now time.Time, skips skipSet) (Checkpoint, []*skippedRow, error) {
	next, skipped, err := a.applyOnce(ctx, db, from, events, through, now, false, skips)
	if errors.Is(err, errRowExists) {
		next, skipped, err = a.applyOnce(ctx, db, from, events, through, now, true, skips)
	}
	return next, skipped, err
}

func (a *applier) applyOnce(ctx context.Context, db Beginner, from Checkpoint, events []decodedEvent, through eventstore.Position, now time.Time, loadAll bool, skips skipSet) (Checkpoint, []*skippedRow, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return from, nil, fmt.Errorf("begin: %w", err)
	}
	next, skipped, err := a.applyBatch(ctx, tx, from, events, through, now, loadAll, skips)
	if err != nil {
		rollback(ctx, tx)
		return from, nil, fmt.Errorf("apply %d events after %q: %w", len(events), from.Text, err)
	}
	if err := tx.Commit(ctx); err != nil {
		// The outcome is unknown; the next batch finds out from the
		// checkpoint row (errCheckpointMoved if it did commit).
		return from, nil, fmt.Errorf("commit %d events after %q: %w", len(events), from.Text, err)
	}
	return next, skipped, nil
}

// applyBatch folds events, read from the log after from, into the read
// models inside tx, and moves the checkpoint to through (the position of the
// last event read: the last of events, or a later one a rebuild filtered
// out); the caller commits. It first takes the schema's apply lock (shared)
// and the checkpoint row (FOR UPDATE), and returns an error wrapping
// errCheckpointMoved if that row no longer holds from: then nothing was
// written and the caller must reload the checkpoint.
//
// Unless loadAll, the rows of an operation requested in this batch are not
// loaded (they cannot exist yet) and are inserted; errRowExists reports that
// one did exist.
//
// Events in skips are not folded but skipped (skip.go); so is an event that
// cannot be folded when its operation already has a skipped event (it
// follows what is missing). Any other event that cannot be decoded or folded
// fails the batch with an *eventError naming it; nothing is written.
func (a *applier) applyBatch(ctx context.Context, tx pgx.Tx, from Checkpoint, events []decodedEvent, through eventstore.Position, now time.Time, loadAll bool, skips skipSet) (Checkpoint, []*skippedRow, error) {
	if through == nil {
		return from, nil, nil
	}
	if _, err := tx.Exec(ctx, a.sql.applyLockShared, applyLockKey(a.schema, a.name)); err != nil {
		return from, nil, fmt.Errorf("apply lock: %w", err)
	}
	held, err := scanCheckpoint(tx.QueryRow(ctx, a.sql.lockCheckpoint, a.name), a.store, a.name)
	if err != nil {
		return from, nil, err
	}
	if held.Text != from.Text || held.EventsApplied != from.EventsApplied {
		return from, nil, fmt.Errorf("%w: at %q (%d events), batch read after %q (%d events)",
			errCheckpointMoved, held.Text, held.EventsApplied, from.Text, from.EventsApplied)
	}
	ops, dels := plan(events, from.EventsApplied, loadAll)
	m, err := a.load(ctx, tx, ops, dels)
	if err != nil {
		return from, nil, err
	}
	for i, d := range events {
		if s, found := skips[d.rec.ID]; found {
			m.skip(d, s.reason, s.detail, now)
			continue
		}
		err := d.err
		if err == nil {
			err = m.fold(d)
		}
		switch {
		case err == nil:
		case d.op != "" && m.incomplete[d.op]:
			m.skip(d, ReasonFollowsSkipped, err.Error(), now)
		default:
			return from, nil, newEventError(i, d, err)
		}
	}
	to := Checkpoint{Position: through, Text: through.String(), EventsApplied: from.EventsApplied + int64(len(events))}
	if err := a.write(ctx, tx, m, to, now, loadAll); err != nil {
		return from, nil, err
	}
	if a.beforeCommit != nil {
		if err := a.beforeCommit(ctx, tx); err != nil {
			return from, nil, err
		}
	}
	return to, m.skipped, nil
}

// plan numbers the batch's events (seq) and returns the operations whose
// rows the batch must load (unless loadAll, not those whose first event here
// is OperationRequested: they cannot have rows yet) and the deliveries it
// touches.
func plan(events []decodedEvent, applied int64, loadAll bool) ([]string, []deliveryKey) {
	var (
		ops     []string
		dels    []deliveryKey
		seenOp  = map[string]bool{}
		seenDel = map[deliveryKey]bool{}
	)
	addDel := func(msg domain.MessageID, op string) {
		k := deliveryKey{MessageID: string(msg), OperationID: op}
		if msg != "" && op != "" && !seenDel[k] {
			seenDel[k] = true
			dels = append(dels, k)
		}
	}
	for i := range events {
		d := &events[i]
		d.seq = applied + int64(i) + 1
		if d.op != "" && !d.evidence && !seenOp[d.op] { // evidence touches no operation's rows
			seenOp[d.op] = true
			if _, requested := d.event.(domain.OperationRequested); loadAll || !requested {
				ops = append(ops, d.op)
			}
		}
		switch ev := d.event.(type) {
		case domain.Claimed:
			addDel(ev.MessageID, d.op)
		case domain.DeliveryDuplicated:
			addDel(ev.MessageID, d.op)
		case domain.PresentationRejected:
			target := string(ev.OperationID)
			if target == "" {
				target = d.op
			}
			addDel(ev.MessageID, target)
		}
	}
	return ops, dels
}

// load reads the rows of ops and dels, in one round trip.
func (a *applier) load(ctx context.Context, tx pgx.Tx, ops []string, dels []deliveryKey) (*batchModel, error) {
	m := newBatchModel()
	if len(ops) == 0 && len(dels) == 0 {
		return m, nil
	}
	msgs, delOps := make([]string, len(dels)), make([]string, len(dels))
	for i, k := range dels {
		msgs[i], delOps[i] = k.MessageID, k.OperationID
	}
	var b pgx.Batch
	var (
		opRows     []operationRow
		execRows   []executionRow
		capRows    []capabilityRow
		delRows    []deliveryRow
		incomplete []string
	)
	if len(ops) > 0 {
		queueJSON(&b, a.sql.loadOperations, &opRows, ops)
		queueJSON(&b, a.sql.loadExecutions, &execRows, ops)
		queueJSON(&b, a.sql.loadCapabilities, &capRows, ops)
		queueJSON(&b, a.sql.loadIncomplete, &incomplete, ops)
	}
	if len(dels) > 0 {
		queueJSON(&b, a.sql.loadDeliveries, &delRows, msgs, delOps)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return nil, fmt.Errorf("load rows: %w", err)
	}
	for i := range opRows {
		m.ops[opRows[i].ID] = &opRows[i]
	}
	for i := range execRows {
		m.execs[execRows[i].ID] = &execRows[i]
	}
	for i := range capRows {
		m.addCapability(&capRows[i])
	}
	for i := range delRows {
		m.dels[delRows[i].deliveryKey] = &delRows[i]
	}
	for _, op := range incomplete {
		m.incomplete[op] = true
	}
	return m, nil
}

// queueJSON queues a load whose one row is a JSON array, decoded into dst.
func queueJSON[R any](b *pgx.Batch, sql string, dst *[]R, args ...any) {
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var raw []byte
		if err := row.Scan(&raw); err != nil {
			return err
		}
		return json.Unmarshal(raw, dst)
	})
}

// write copies in the rows folding created and the append-only rows (one
// COPY per table), then, in one round trip, upserts the rows it changed and
// moves the checkpoint. A batch applied again (again: see errRowExists)
// inserts its append-only rows once instead, leaving those already there.
func (a *applier) write(ctx context.Context, tx pgx.Tx, m *batchModel, to Checkpoint, now time.Time, again bool) error {
	var b pgx.Batch
	if err := writeTable(ctx, tx, &b, a.sql.operations, m.ops, func(r *operationRow) rowChange { return r.change }, strings.Compare); err != nil {
		return err
	}
	if err := writeTable(ctx, tx, &b, a.sql.executions, m.execs, func(r *executionRow) rowChange { return r.change }, strings.Compare); err != nil {
		return err
	}
	if err := writeTable(ctx, tx, &b, a.sql.capabilities, m.caps, func(r *capabilityRow) rowChange { return r.change }, strings.Compare); err != nil {
		return err
	}
	if err := writeTable(ctx, tx, &b, a.sql.deliveries, m.dels, func(r *deliveryRow) rowChange { return r.change }, compareDeliveryKeys); err != nil {
		return err
	}
	if err := writeAppendOnly(ctx, tx, &b, a.sql.evidence, m.evidence, again); err != nil {
		return err
	}
	if err := writeAppendOnly(ctx, tx, &b, a.sql.reconciliations, m.recons, again); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.insertSkipped, m.skipped); err != nil {
		return err
	}
	b.Queue(a.sql.writeCheckpoint, a.name, to.Text, to.EventsApplied, now).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("checkpoint %s: %w: no row updated", a.name, errCheckpointMoved)
		}
		return nil
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return writeError(err)
	}
	return nil
}

// normalizer is any row: see rows.go.
type normalizer interface{ normalize() }

// copier is a row COPY can write.
type copier interface {
	normalizer
	copyValues() []any
}

// writeTable copies a table's created rows in and queues the upsert of its
// updated ones.
func writeTable[K comparable, R copier](ctx context.Context, tx pgx.Tx, b *pgx.Batch, sql tableStatements, rows map[K]R, change func(R) rowChange, compare func(a, b K) int) error {
	fresh, updates := changedRows(rows, change, compare)
	if err := copyRows(ctx, tx, sql, fresh); err != nil {
		return err
	}
	return queueRows(b, sql.upsert, updates)
}

// copyRows copies rows (none: nothing) into sql's table with one COPY.
func copyRows[R copier](ctx context.Context, tx pgx.Tx, sql tableStatements, rows []R) error {
	if len(rows) == 0 {
		return nil
	}
	err := copyBinary(ctx, tx, sql.copy, len(sql.columns), len(rows), func(i int) []any {
		rows[i].normalize()
		return rows[i].copyValues()
	})
	if err != nil {
		return writeError(err)
	}
	return nil
}

// writeAppendOnly copies rows in, or (again) queues their insert-once.
func writeAppendOnly[R copier](ctx context.Context, tx pgx.Tx, b *pgx.Batch, sql tableStatements, rows []R, again bool) error {
	if again {
		return queueRows(b, sql.upsert, rows)
	}
	return copyRows(ctx, tx, sql, rows)
}

// writeError wraps a failed write; a unique violation means a row the batch
// created existed already (errRowExists).
func writeError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // unique_violation
		return fmt.Errorf("write rows: %w: %w", errRowExists, err)
	}
	return fmt.Errorf("write rows: %w", err)
}

// queueRows queues one statement writing rows (a JSON array), unless there
// are none.
func queueRows[R normalizer](b *pgx.Batch, sql string, rows []R) error {
	if len(rows) == 0 {
		return nil
	}
	for _, r := range rows {
		r.normalize()
	}
	body, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encode rows: %w", err)
	}
	b.Queue(sql, body)
	return nil
}
