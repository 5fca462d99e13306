package projections

import (
	"context"
	"fmt"
	"time"

	"opledger/domain"
	"opledger/domain/setaside"
)

// An event the projector cannot decode or fold is an item failure, never an
// outage: the projector records it (role projector), folds the events
// before it, pauses Policy.Delay and tries it again; once Policy.MaxAttempts
// tries failed, the event is set aside and skipped (skip.go), the
// checkpoint moves past it, and every later event is projected. An error of
// the read-model database, the log or the set-aside store is an outage: the
// batch is retried after the back-off, nothing is set aside.

// retryEvent says the batch stopped before an event that failed and is not
// set aside yet: try it again after delay.
type retryEvent struct {
	delay    time.Duration
	attempts int
	cause    *eventError
}

func (e *retryEvent) Error() string {
	return fmt.Sprintf("%v (failed %d times; tried again in %s)", e.cause, e.attempts, e.delay)
}
func (e *retryEvent) Unwrap() error { return e.cause }

// eventFailed records one failed try at ee's event and returns the item as
// it now stands. An error means the failure could not be recorded: an
// outage of the set-aside store.
func (p *Projector) eventFailed(ctx context.Context, ee *eventError, now time.Time) (setaside.Item, error) {
	it, err := p.cfg.SetAside.Fail(ctx, setaside.Failure{
		Role: setaside.RoleProjector, Item: ee.id, OperationID: domain.OperationID(ee.op),
		Reason: ee.reason, Detail: ee.err.Error(), At: now,
	}, p.cfg.Policy)
	if err != nil {
		return setaside.Item{}, fmt.Errorf("record the failure of event %s: %w", ee.id, err)
	}
	p.failing = ee.id
	if p.cfg.OnItemFailure != nil {
		p.cfg.OnItemFailure(it)
	}
	if it.SetAside {
		p.cfg.Logger.ErrorContext(ctx, "projector: event set aside and skipped; its operation is marked projection_incomplete",
			"projection", p.cfg.Name, "event_id", ee.id, "operation_id", ee.op, "reason", ee.reason, "attempts", it.Attempts, "err", ee.err)
		return it, nil
	}
	p.cfg.Logger.WarnContext(ctx, "projector: event cannot be folded; tried again after a pause", "projection", p.cfg.Name,
		"event_id", ee.id, "operation_id", ee.op, "reason", ee.reason, "attempts", it.Attempts,
		"max_attempts", p.cfg.Policy.MaxAttempts, "err", ee.err)
	return it, nil
}

// committed takes note of a committed batch: it records the events skipped
// because they follow a skipped one (set aside at once, so that operators
// see them), and clears the failures of the event the projector had
// stopped before if that event was folded now. Failures to record are
// logged: skipped_events holds the skips regardless.
func (p *Projector) committed(ctx context.Context, folded []decodedEvent, skipped []*skippedRow, skips skipSet, now time.Time) {
	for _, s := range skipped {
		if _, setAside := skips[s.EventID]; setAside {
			continue
		}
		it, err := p.cfg.SetAside.Fail(ctx, setaside.Failure{
			Role: setaside.RoleProjector, Item: s.EventID, OperationID: domain.OperationID(s.OperationID),
			Reason: s.Reason, Detail: s.Detail, At: now,
		}, setaside.Policy{MaxAttempts: 1})
		if err != nil {
			p.cfg.Logger.WarnContext(ctx, "projector: cannot record a skipped event in the set-aside store", "event_id", s.EventID, "err", err)
			continue
		}
		if p.cfg.OnItemFailure != nil {
			p.cfg.OnItemFailure(it)
		}
		p.cfg.Logger.ErrorContext(ctx, "projector: event skipped: it follows a skipped event of its operation", "projection", p.cfg.Name,
			"event_id", s.EventID, "operation_id", s.OperationID, "detail", s.Detail)
	}
	if p.failing == "" {
		return
	}
	for _, d := range folded {
		if d.rec.ID != p.failing {
			continue
		}
		if _, setAside := skips[d.rec.ID]; !setAside {
			if err := p.cfg.SetAside.Clear(ctx, setaside.RoleProjector, d.rec.ID); err != nil {
				p.cfg.Logger.WarnContext(ctx, "projector: cannot clear a folded event's failures", "event_id", d.rec.ID, "err", err)
			}
		}
		p.failing = ""
		return
	}
}
