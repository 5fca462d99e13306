package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"opledger/adapters/transport"
)

// Consume implements transport.Source: Concurrency claimers each claim one
// message at a time, hand it to handle, and settle it as the disposition
// says. A claimer that finds nothing pauses (PollMin doubling to PollMax).
// When ctx ends, messages in flight get DrainTimeout to finish and settle;
// Consume then returns ctx.Err(). A claimer whose claims fail
// MaxClaimFailures times in a row makes Consume return that error.
func (q *Queue) Consume(ctx context.Context, handle transport.HandleFunc) error {
	if q.cfg.WorkerID == "" {
		return errors.New("pgqueue: consume: WorkerID is required")
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range q.cfg.Concurrency {
		g.Go(func() error { return q.claimer(gctx, fmt.Sprintf("%s/%d", q.cfg.WorkerID, i), handle) })
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (q *Queue) claimer(ctx context.Context, id string, handle transport.HandleFunc) error {
	log := q.cfg.Logger.With("claimer", id, "topic", q.cfg.Topic)
	poll := q.cfg.PollMin
	timer := time.NewTimer(poll)
	timer.Stop()
	defer timer.Stop()
	for failures := 0; ; {
		if ctx.Err() != nil {
			return nil
		}
		claimed, err := q.Claim(ctx, id, 1)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			if failures >= q.cfg.MaxClaimFailures {
				return fmt.Errorf("pgqueue: %d consecutive failed claims: %w", failures, err)
			}
			log.WarnContext(ctx, "claim failed", "err", err, "failures", failures)
		default:
			failures = 0
		}
		outage := false
		for _, c := range claimed {
			outage = q.deliver(ctx, c, handle) || outage
		}
		if len(claimed) > 0 && !outage {
			poll = q.cfg.PollMin
			continue
		}
		// Nothing to do, or the ledger's store is out: pause (doubling up to
		// PollMax) rather than claim every other message into the outage.
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		poll = min(poll*2, q.cfg.PollMax)
	}
}

// deliver handles one claimed message and settles it, on a context that
// outlives a stop by DrainTimeout. A message that cannot be settled is left
// to its visibility timeout: it is handed out again. It reports whether the
// handling met an outage.
func (q *Queue) deliver(ctx context.Context, c Claimed, handle transport.HandleFunc) (outage bool) {
	log := q.cfg.Logger.With("row", c.ID, "message_id", c.MessageID, "attempt", c.Attempt, "counted", c.Counted())
	if c.Exhausted {
		log.WarnContext(ctx, "dead-lettered: attempts exhausted", "max_attempts", q.cfg.MaxAttempts)
		return false
	}
	hctx, cancel := transport.DrainContext(ctx, q.cfg.DrainTimeout)
	defer cancel()
	d := handle(hctx, c.Inbound())
	outage = d.Action == transport.ActionRetry && transport.IsOutage(hctx, d)
	if err := q.Settle(hctx, c, d); err != nil {
		log.WarnContext(ctx, "message not settled; it will be handed out again after its visibility timeout", "action", d.Action, "err", err)
	}
	return outage
}
