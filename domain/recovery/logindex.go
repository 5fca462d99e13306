package recovery

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// LogIndex is an Index kept in memory by following the global log. It holds
// only open executions (Executing or Unknown), so its size is bounded by the
// work in flight, not by history. It suits the in-memory store and tests; with
// Postgres the projections serve as the index.
type LogIndex struct {
	store eventstore.Store
	// MaxCatchUp bounds the events one query reads to catch up (default
	// 100,000); a query past it answers from what it has read so far.
	MaxCatchUp int

	mu    sync.Mutex
	after eventstore.Position
	open  map[domain.ExecutionID]*openExecution
}

type openExecution struct {
	ref            ExecutionRef
	state          domain.ExecutionState
	leaseExpiresAt time.Time
}

// NewLogIndex returns an index that reads store's log from the start.
func NewLogIndex(store eventstore.Store) *LogIndex {
	return &LogIndex{store: store, MaxCatchUp: 100_000, open: map[domain.ExecutionID]*openExecution{}}
}

// catchUp folds new events into the index.
func (x *LogIndex) catchUp(ctx context.Context) error {
	const page = 1000
	for read := 0; read < x.MaxCatchUp; {
		batch, err := x.store.ReadAll(ctx, x.after, page)
		if err != nil {
			return fmt.Errorf("log index: %w", err)
		}
		for _, rec := range batch {
			op, ok := domain.OperationIDFromStream(rec.StreamID)
			if !ok {
				continue
			}
			e, err := ledger.DecodeRecorded(rec)
			if err != nil {
				return fmt.Errorf("log index: %s@%d: %w", rec.StreamID, rec.Version, err)
			}
			x.apply(op, e)
		}
		if len(batch) > 0 {
			x.after = batch[len(batch)-1].Position
		}
		read += len(batch)
		if len(batch) < page {
			return nil
		}
	}
	return nil
}

func (x *LogIndex) apply(op domain.OperationID, e domain.Event) {
	switch ev := e.(type) {
	case domain.Claimed:
		x.open[ev.ExecutionID] = &openExecution{
			ref:   ExecutionRef{OperationID: op, ExecutionID: ev.ExecutionID, Since: ev.LeaseExpiresAt},
			state: domain.ExecExecuting, leaseExpiresAt: ev.LeaseExpiresAt,
		}
	case domain.LeaseRenewed:
		if o := x.open[ev.ExecutionID]; o != nil {
			o.leaseExpiresAt, o.ref.Since = ev.LeaseExpiresAt, ev.LeaseExpiresAt
		}
	case domain.OutcomeUnknown:
		x.toUnknown(ev.ExecutionID, ev.RecordedAt)
	case domain.LeaseLapsed:
		x.toUnknown(ev.ExecutionID, ev.LapsedAt)
	case domain.OutcomeRecorded:
		delete(x.open, ev.ExecutionID)
	case domain.LateOutcomeRecorded:
		delete(x.open, ev.ExecutionID)
	case domain.Reconciled:
		delete(x.open, ev.ExecutionID)
	case domain.Escalated:
		delete(x.open, ev.ExecutionID) // a person's queue now, not the reconciler's
	}
}

func (x *LogIndex) toUnknown(id domain.ExecutionID, at time.Time) {
	if o := x.open[id]; o != nil {
		o.state, o.ref.Since = domain.ExecUnknown, at
	}
}

// ExpiredLeases implements Index.
func (x *LogIndex) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]ExecutionRef, error) {
	return x.query(ctx, limit, func(o *openExecution) bool {
		return o.state == domain.ExecExecuting && !now.Before(o.leaseExpiresAt)
	})
}

// UnknownExecutions implements Index.
func (x *LogIndex) UnknownExecutions(ctx context.Context, limit int) ([]ExecutionRef, error) {
	return x.query(ctx, limit, func(o *openExecution) bool { return o.state == domain.ExecUnknown })
}

func (x *LogIndex) query(ctx context.Context, limit int, match func(*openExecution) bool) ([]ExecutionRef, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.catchUp(ctx); err != nil {
		return nil, err
	}
	var out []ExecutionRef
	for _, o := range x.open {
		if match(o) {
			out = append(out, o.ref)
		}
	}
	slices.SortFunc(out, func(a, b ExecutionRef) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.ExecutionID, b.ExecutionID))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
