package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// LogIndexConfig configures a LogIndex. Zero values take defaults.
type LogIndexConfig struct {
	Store eventstore.Store // required
	// MaxCatchUp bounds the events one query reads to catch up (default
	// 100,000); a query past it answers from what it has read so far.
	MaxCatchUp int
	// SetAside keeps the events the index cannot decode (default: a
	// setaside.Memory, with a warning logged).
	SetAside setaside.Store
	// Policy bounds how often an undecodable event is tried again before it
	// is set aside and read past (zero fields: setaside.DefaultPolicy).
	Policy setaside.Policy
	Clock  clock.Clock // default clock.System
	Logger *slog.Logger
	// OnItemFailure, when set, is called with every failure recorded.
	OnItemFailure func(setaside.Item)
}

// LogIndex is an Index kept in memory by following the global log. It holds
// only open executions (Executing or Unknown), so its size is bounded by the
// work in flight, not by history. It suits the in-memory store and tests; with
// Postgres the projections serve as the index.
//
// An event of an operation stream that cannot be decoded is an item
// failure (role log-index, item = the event id): the index stops before it
// and answers from what it has read; later queries try it again after the
// policy's backoff, and once it is set aside the index reads past it. The
// operation's executions may then be missing a transition in the index; the
// roles load the stream itself before acting, so they find the stream
// corrupt and set the execution aside under their own role. Safe for
// concurrent use.
type LogIndex struct {
	cfg   LogIndexConfig
	items *items

	mu      sync.Mutex
	after   eventstore.Position
	open    map[domain.ExecutionID]*openExecution
	failing string // the event id the index stopped before, if any
}

type openExecution struct {
	ref            ExecutionRef
	state          domain.ExecutionState
	leaseExpiresAt time.Time
}

// NewLogIndex returns an index that reads cfg.Store's log from the start.
func NewLogIndex(cfg LogIndexConfig) (*LogIndex, error) {
	if cfg.Store == nil {
		return nil, errors.New("log index: config: Store is required")
	}
	cfg.MaxCatchUp = cmp.Or(cfg.MaxCatchUp, 100_000)
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxCatchUp < 1 {
		return nil, errors.New("log index: config: MaxCatchUp must be positive")
	}
	items, err := newItems(setaside.RoleLogIndex, cfg.SetAside, cfg.Policy, cfg.Clock, cfg.Logger, cfg.OnItemFailure)
	if err != nil {
		return nil, err
	}
	return &LogIndex{cfg: cfg, items: items, open: map[domain.ExecutionID]*openExecution{}}, nil
}

// catchUp folds new events into the index. It stops early, without error,
// before an undecodable event that is not set aside yet.
func (x *LogIndex) catchUp(ctx context.Context) error {
	const page = 1000 // events per read; MaxCatchUp bounds the reads
	for read := 0; read < x.cfg.MaxCatchUp; {
		batch, err := x.cfg.Store.ReadAll(ctx, x.after, page)
		if err != nil {
			return fmt.Errorf("log index: %w", err)
		}
		for _, rec := range batch {
			if op, ok := domain.OperationIDFromStream(rec.StreamID); ok {
				d, err := codec.DecodeRecorded(rec)
				if err != nil {
					if !x.readPast(ctx, rec, op, err) {
						return nil
					}
				} else {
					x.passed(ctx, rec)
					if !x.apply(op, d.Event) {
						x.cfg.Logger.WarnContext(ctx, "log index: an event type it has no case for", "event_id", rec.ID, "type", rec.Type)
					}
				}
			}
			x.after = rec.Position
		}
		read += len(batch)
		if len(batch) < page {
			return nil
		}
	}
	return nil
}

// readPast records that rec cannot be decoded and reports whether it is set
// aside (the index reads past it) or must be tried again later (the index
// stops before it).
func (x *LogIndex) readPast(ctx context.Context, rec eventstore.RecordedEvent, op domain.OperationID, cause error) bool {
	s := x.items
	now := s.clock.Now()
	held, err := s.store.Held(ctx, s.role, []string{rec.ID}, now)
	if err != nil {
		s.log.WarnContext(ctx, "log index: cannot read the set-aside store; stopping before an undecodable event", "event_id", rec.ID, "err", err)
		return false
	}
	if it, ok := held[rec.ID]; ok {
		return it.SetAside // backing off: stop before it until RetryAt
	}
	x.failing = rec.ID
	it, ok := s.fail(ctx, rec.ID, op, ReasonEventUndecodable, fmt.Errorf("%s@%d (%s): %w", rec.StreamID, rec.Version, rec.Type, cause))
	return ok && it.SetAside
}

// passed clears the failures of the event the index had stopped before,
// once it decodes (a newer binary reads it).
func (x *LogIndex) passed(ctx context.Context, rec eventstore.RecordedEvent) {
	if x.failing == rec.ID {
		x.failing = ""
		x.items.clear(ctx, rec.ID)
	}
}

// apply folds e into the index and reports whether it has a case for e's
// type (Indexes): every registered type has one, possibly one that ignores
// it on purpose.
func (x *LogIndex) apply(op domain.OperationID, e domain.Event) bool {
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
	case domain.OperationRequested, domain.Decided, domain.CapabilityIssued, domain.CapabilityRevoked,
		domain.DeliveryDuplicated, domain.PresentationRejected, domain.WriteRefused, domain.RefusalsSummarized,
		domain.LogRegressed, domain.LogRegressionAcknowledged:
		// Nothing about an open execution's lease or state.
	case domain.LostEffectEscalated:
		// Opens an Escalated execution: a person's queue, not the reconciler's.
	default:
		return false
	}
	return true
}

// Indexes reports whether the log index has an explicit case for e's type
// (one that acts on it, or ignores it on purpose). The codec's coverage
// test asks it for every registered event type.
func Indexes(e domain.Event) bool {
	x := &LogIndex{open: map[domain.ExecutionID]*openExecution{}}
	return x.apply("OP-COVERAGE", e)
}

func (x *LogIndex) toUnknown(id domain.ExecutionID, at time.Time) {
	if o := x.open[id]; o != nil {
		o.state, o.ref.Since = domain.ExecUnknown, at
	}
}

// ExpiredLeases implements Index.
func (x *LogIndex) ExpiredLeases(ctx context.Context, now time.Time, after Cursor, limit int) ([]ExecutionRef, error) {
	return x.query(ctx, after, limit, func(o *openExecution) bool {
		return o.state == domain.ExecExecuting && !now.Before(o.leaseExpiresAt)
	})
}

// UnknownExecutions implements Index.
func (x *LogIndex) UnknownExecutions(ctx context.Context, after Cursor, limit int) ([]ExecutionRef, error) {
	return x.query(ctx, after, limit, func(o *openExecution) bool { return o.state == domain.ExecUnknown })
}

func (x *LogIndex) query(ctx context.Context, after Cursor, limit int, match func(*openExecution) bool) ([]ExecutionRef, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.catchUp(ctx); err != nil {
		return nil, err
	}
	var out []ExecutionRef
	for _, o := range x.open {
		if match(o) && after.After(o.ref) {
			out = append(out, o.ref)
		}
	}
	slices.SortFunc(out, func(a, b ExecutionRef) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.ExecutionID, b.ExecutionID))
	})
	if len(out) > max(limit, 0) {
		out = out[:max(limit, 0)]
	}
	return out, nil
}

var _ Index = (*LogIndex)(nil)
