package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

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

// applyBatch folds events, read from the log after from, into the read
// models inside tx, and moves the checkpoint to through (the position of the
// last event read: the last of events, or a later one a rebuild filtered
// out); the caller commits. It first takes the schema's apply lock (shared)
// and the checkpoint row (FOR UPDATE), and returns an error wrapping
// errCheckpointMoved if that row no longer holds from: then nothing was
// written and the caller must reload the checkpoint.
func (a *applier) applyBatch(ctx context.Context, tx pgx.Tx, from Checkpoint, events []eventstore.RecordedEvent, through eventstore.Position, now time.Time) (Checkpoint, error) {
	if through == nil {
		return from, nil
	}
	if _, err := tx.Exec(ctx, a.sql.applyLockShared, applyLockKey(a.schema, a.name)); err != nil {
		return from, fmt.Errorf("apply lock: %w", err)
	}
	held, err := scanCheckpoint(tx.QueryRow(ctx, a.sql.lockCheckpoint, a.name), a.store, a.name)
	if err != nil {
		return from, err
	}
	if held.Text != from.Text || held.EventsApplied != from.EventsApplied {
		return from, fmt.Errorf("%w: at %q (%d events), batch read after %q (%d events)",
			errCheckpointMoved, held.Text, held.EventsApplied, from.Text, from.EventsApplied)
	}
	decoded, ops, dels, err := decodeBatch(events, from.EventsApplied)
	if err != nil {
		return from, err
	}
	m, err := a.load(ctx, tx, ops, dels)
	if err != nil {
		return from, err
	}
	for _, d := range decoded {
		if err := m.fold(d); err != nil {
			return from, err
		}
	}
	to := Checkpoint{Position: through, Text: through.String(), EventsApplied: from.EventsApplied + int64(len(events))}
	if err := a.write(ctx, tx, m, to, now); err != nil {
		return from, err
	}
	if a.beforeCommit != nil {
		if err := a.beforeCommit(ctx, tx); err != nil {
			return from, err
		}
	}
	return to, nil
}

// decodeBatch decodes the events of operation streams and of the evidence
// stream; events of other streams stay undecoded and fold to nothing. It
// returns the operations and deliveries whose rows the batch needs.
func decodeBatch(events []eventstore.RecordedEvent, applied int64) ([]decodedEvent, []string, []deliveryKey, error) {
	decoded := make([]decodedEvent, len(events))
	var (
		ops     []string
		dels    []deliveryKey
		seenOp  = map[string]bool{}
		seenDel = map[deliveryKey]bool{}
	)
	addOp := func(op string) {
		if op != "" && !seenOp[op] {
			seenOp[op] = true
			ops = append(ops, op)
		}
	}
	addDel := func(msg domain.MessageID, op string) {
		k := deliveryKey{MessageID: string(msg), OperationID: op}
		if msg != "" && op != "" && !seenDel[k] {
			seenDel[k] = true
			dels = append(dels, k)
		}
	}
	for i := range events {
		rec := &events[i]
		d := decodedEvent{rec: rec, seq: applied + int64(i) + 1}
		op, isOp := domain.OperationIDFromStream(rec.StreamID)
		if !isOp && rec.StreamID != domain.EvidenceStream {
			decoded[i] = d
			continue
		}
		e, err := ledger.DecodeRecorded(*rec)
		if err != nil {
			return nil, nil, nil, corrupt(d, "%v", err)
		}
		d.event = e
		if isOp {
			d.op = string(op)
		}
		if showsActor(rec.Type) {
			meta, err := domain.DecodeMetadata(rec.Metadata)
			if err != nil {
				return nil, nil, nil, corrupt(d, "%v", err)
			}
			d.actor = meta.Actor
		}
		addOp(d.op)
		switch ev := e.(type) {
		case domain.Claimed:
			addDel(ev.MessageID, d.op)
		case domain.DeliveryDuplicated:
			addDel(ev.MessageID, d.op)
		case domain.PresentationRejected:
			target := string(ev.OperationID)
			if target == "" {
				target = d.op
			}
			addOp(target)
			addDel(ev.MessageID, target)
		}
		decoded[i] = d
	}
	return decoded, ops, dels, nil
}

// showsActor reports whether the read models show the metadata's actor for
// an event type (the others skip decoding the metadata).
func showsActor(eventType string) bool {
	switch eventType {
	case domain.TypeCapabilityRevoked, domain.TypeLateOutcomeRecorded, domain.TypeReconciled,
		domain.TypeEscalated, domain.TypeWriteRefused:
		return true
	}
	return false
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
		opRows   []operationRow
		execRows []executionRow
		capRows  []capabilityRow
		delRows  []deliveryRow
	)
	queueJSON(&b, a.sql.loadOperations, &opRows, ops)
	queueJSON(&b, a.sql.loadExecutions, &execRows, ops)
	queueJSON(&b, a.sql.loadCapabilities, &capRows, ops)
	queueJSON(&b, a.sql.loadDeliveries, &delRows, msgs, delOps)
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
		m.caps[capRows[i].ID] = &capRows[i]
	}
	for i := range delRows {
		m.dels[delRows[i].deliveryKey] = &delRows[i]
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

// write upserts the rows folding changed, inserts the append-only rows and
// moves the checkpoint, in one round trip.
func (a *applier) write(ctx context.Context, tx pgx.Tx, m *batchModel, to Checkpoint, now time.Time) error {
	var b pgx.Batch
	if err := queueRows(&b, a.sql.upsertOperations, dirtyRows(m.ops, func(r *operationRow) bool { return r.dirty }, strings.Compare)); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.upsertExecutions, dirtyRows(m.execs, func(r *executionRow) bool { return r.dirty }, strings.Compare)); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.upsertCapabilities, dirtyRows(m.caps, func(r *capabilityRow) bool { return r.dirty }, strings.Compare)); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.upsertDeliveries, dirtyRows(m.dels, func(r *deliveryRow) bool { return r.dirty }, compareDeliveryKeys)); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.insertEvidence, m.evidence); err != nil {
		return err
	}
	if err := queueRows(&b, a.sql.insertReconciliations, m.recons); err != nil {
		return err
	}
	b.Queue(a.sql.writeCheckpoint, a.name, to.Text, to.EventsApplied, now).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("checkpoint %s: %w: no row updated", a.name, errCheckpointMoved)
		}
		return nil
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("write rows: %w", err)
	}
	return nil
}

// queueRows queues one statement writing rows (a JSON array), unless there
// are none.
func queueRows[R any](b *pgx.Batch, sql string, rows []R) error {
	if len(rows) == 0 {
		return nil
	}
	body, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("encode rows: %w", err)
	}
	b.Queue(sql, body)
	return nil
}
