package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// Reason codes of the failures the recovery roles record (setaside.Item's
// Reason).
const (
	ReasonStreamCorrupt    = "stream.corrupt"    // ledger.ErrCorruptStream: the stream cannot be folded
	ReasonContention       = "ledger.contention" // ledger.ErrContention: conflicts beyond the handler's retries
	ReasonStoreUnavailable = "store.unavailable" // unreachable for this item while other items were served
	ReasonItemError        = "item.error"        // any other error (a stream over the handler's length bound, ...)
	ReasonEventUndecodable = "event.undecodable" // the log index cannot decode an event
	reasonRefusedPrefix    = "refused."          // + the refusal's reason: a refusal the role does not expect
)

// maxConsecutiveOutages is how many candidates in a row may find the store
// unreachable before a round stops as an outage: enough to ride out one
// dropped connection, few enough that a database restart costs a round a
// handful of connection timeouts rather than one per candidate.
const maxConsecutiveOutages = 3

// items is what a role shares with every other about failing candidates:
// where failures are kept, how often they are retried, and who hears of
// them.
type items struct {
	role    setaside.Role
	store   setaside.Store
	policy  setaside.Policy
	clock   clock.Clock
	log     *slog.Logger
	observe func(setaside.Item) // may be nil
}

// newItems fills the defaults: without a store, failures are kept in
// memory (and forgotten on restart), which is logged as a warning.
func newItems(role setaside.Role, store setaside.Store, p setaside.Policy, clk clock.Clock, log *slog.Logger, observe func(setaside.Item)) (*items, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: config: %w", role, err)
	}
	if store == nil {
		log.Warn("no set-aside store configured: failing items are kept in memory and forgotten on restart", "role", role)
		store = &setaside.Memory{}
	}
	return &items{role: role, store: store, policy: p, clock: clk, log: log, observe: observe}, nil
}

// isOutage reports whether err says nothing about the item: the store
// could not be reached (or could not confirm a call), or the role's
// context ended.
func isOutage(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, eventstore.ErrUnavailable) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// reasonOf names an item failure by a stable code.
func reasonOf(err error) string {
	var refusal *domain.Refusal
	switch {
	case errors.Is(err, ledger.ErrCorruptStream):
		return ReasonStreamCorrupt
	case errors.Is(err, ledger.ErrContention):
		return ReasonContention
	case errors.Is(err, eventstore.ErrUnavailable):
		return ReasonStoreUnavailable
	case errors.As(err, &refusal):
		return reasonRefusedPrefix + string(refusal.Reason)
	}
	return ReasonItemError
}

// fail records one failed attempt at item (an execution id; for the log
// index an event id) of operation op and logs it, and returns the item as
// it now stands. A failure that cannot be recorded is logged and forgotten
// (ok false): the item is then simply tried again next round.
func (s *items) fail(ctx context.Context, item string, op domain.OperationID, reason string, cause error) (it setaside.Item, ok bool) {
	it, err := s.store.Fail(ctx, setaside.Failure{
		Role: s.role, Item: item, OperationID: op, Reason: reason, Detail: cause.Error(), At: s.clock.Now(),
	}, s.policy)
	if err != nil {
		s.log.WarnContext(ctx, "cannot record a failing item; it is tried again next round", "role", s.role,
			"item", item, "operation_id", op, "reason", reason, "cause", cause, "err", err)
		return setaside.Item{}, false
	}
	if s.observe != nil {
		s.observe(it)
	}
	if it.SetAside {
		s.log.ErrorContext(ctx, "item set aside: no loop retries it until an operator releases it (opledger set-aside release)",
			"role", s.role, "item", item, "operation_id", op, "reason", reason, "attempts", it.Attempts, "err", cause)
		return it, true
	}
	s.log.WarnContext(ctx, "item failed; retried after a backoff", "role", s.role, "item", item, "operation_id", op,
		"reason", reason, "attempts", it.Attempts, "max_attempts", s.policy.MaxAttempts, "retry_at", it.RetryAt, "err", cause)
	return it, true
}

// clear forgets item's failures after it was handled. A failure to clear is
// logged: the stale entry only delays the item's next try.
func (s *items) clear(ctx context.Context, item string) {
	if err := s.store.Clear(ctx, s.role, item); err != nil {
		s.log.WarnContext(ctx, "cannot clear a handled item's failures", "role", s.role, "item", item, "err", err)
	}
}

// process handles one round's candidates with do, which returns nil when it
// handled the candidate (refusals the role expects included) and an error
// otherwise. It never returns early on an item's failure:
//
//   - an error that is not an outage (see isOutage) is the item's: recorded
//     (fail), and the round goes on;
//   - an outage error is deferred: if other candidates of the round are
//     served, the store is up and the deferred items are recorded as failures
//     (ReasonStoreUnavailable); if maxConsecutiveOutages candidates in a
//     row find the store unreachable, the round stops as an outage, nothing
//     is recorded, and the walk resumes at the first deferred candidate;
//   - a handled candidate's failures are cleared.
//
// It returns how many candidates were handled through (len(cands) when the
// round ran through; else the index the walk resumes at) and the outage.
func (s *items) process(ctx context.Context, cands []candidate, do func(context.Context, ExecutionRef) error) (int, error) {
	type deferredItem struct {
		at  int
		err error
	}
	var (
		deferred    []deferredItem
		consecutive int
		served      bool
	)
	for i, c := range cands {
		err := do(ctx, c.ref)
		switch {
		case err == nil:
			served, consecutive = true, 0
			s.clear(ctx, string(c.ref.ExecutionID))
		case ctx.Err() != nil:
			return firstOr(i, deferred, func(d deferredItem) int { return d.at }), ctx.Err()
		case isOutage(ctx, err):
			consecutive++
			deferred = append(deferred, deferredItem{at: i, err: err})
			if consecutive >= maxConsecutiveOutages {
				return deferred[0].at, fmt.Errorf("%s: %d candidates in a row found the store unreachable: %w", s.role, consecutive, err)
			}
		default:
			served, consecutive = true, 0
			s.fail(ctx, string(c.ref.ExecutionID), c.ref.OperationID, reasonOf(err), err)
		}
	}
	if served {
		for _, d := range deferred {
			s.fail(ctx, string(cands[d.at].ref.ExecutionID), cands[d.at].ref.OperationID, ReasonStoreUnavailable, d.err)
		}
	}
	return len(cands), nil
}

func firstOr[T any](def int, list []T, at func(T) int) int {
	if len(list) > 0 {
		return at(list[0])
	}
	return def
}
