package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/adapters/transport"
)

// Consume implements transport.Source. One claim loop keeps up to
// Concurrency messages in flight: it claims as many as there are free
// slots in one statement (at most one message per key, see Claim), hands
// each to a goroutine of its own, and claims again once a quarter of the
// slots are free, or all of them, so that a busy queue costs one claim per several
// messages and an idle one polls once per pause, not once per slot. Each
// message is settled as its disposition says when its handling ends;
// acknowledgements of messages that end at about the same time share one
// statement, sent off the handlers' goroutines (see acker). A claim that
// finds nothing pauses the loop
// (PollMin doubling to PollMax, cut short when a message in flight ends);
// so does a message that met an outage of the ledger's store, rather than
// claiming the others into the outage. When ctx ends, no more is claimed,
// messages in flight get DrainTimeout to finish and settle, and Consume
// returns ctx.Err(). MaxClaimFailures failed claims in a row make Consume
// return that error once the messages in flight are settled.
func (q *Queue) Consume(ctx context.Context, handle transport.HandleFunc) error {
	if q.cfg.WorkerID == "" {
		return errors.New("pgqueue: consume: WorkerID is required")
	}
	log := q.cfg.Logger.With("claimer", q.cfg.WorkerID, "topic", q.cfg.Topic)
	l := &claimLoop{q: q, acks: startAcker(ctx, q, log), ended: make(chan bool, q.cfg.Concurrency), poll: q.cfg.PollMin}
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	defer l.timer.Stop()
	defer func() {
		for ; l.inFlight > 0; l.inFlight-- { // every message in flight ends within DrainTimeout
			<-l.ended
		}
		l.acks.stop() // then their acknowledgements go out
	}()
	refill := max(1, q.cfg.Concurrency/4)
	for failures := 0; ctx.Err() == nil; {
		if l.outage {
			// A message met an outage of the ledger's store: pause rather
			// than claim the others into it.
			l.outage = false
			l.pause(ctx, l.poll, false)
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		free := q.cfg.Concurrency - l.inFlight
		if free < refill && l.inFlight > 0 {
			l.pause(ctx, time.Hour, true) // until a message ends (bounded by DrainTimeout and ctx)
			continue
		}
		claimed, err := q.Claim(ctx, q.cfg.WorkerID, free)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			failures++
			if failures >= q.cfg.MaxClaimFailures {
				return fmt.Errorf("pgqueue: %d consecutive failed claims: %w", failures, err)
			}
			log.WarnContext(ctx, "claim failed", "err", err, "failures", failures)
			l.pause(ctx, l.poll, false)
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		failures = 0
		for _, c := range claimed {
			if c.Exhausted {
				q.deliver(ctx, c, handle, l.acks) // dead-lettered by the claim: only logged
				continue
			}
			l.inFlight++
			go func() { l.ended <- q.deliver(ctx, c, handle, l.acks) }()
		}
		switch {
		case len(claimed) == 0:
			// Nothing ready: pause, doubling.
			l.pause(ctx, l.poll, false)
			l.poll = min(2*l.poll, q.cfg.PollMax)
		case len(claimed) < free:
			// Fewer ready than there was room for: look again when one
			// ends, or after PollMin.
			l.poll = q.cfg.PollMin
			l.pause(ctx, q.cfg.PollMin, true)
		default:
			l.poll = q.cfg.PollMin
		}
	}
	return ctx.Err()
}

// claimLoop is Consume's state.
type claimLoop struct {
	q        *Queue
	acks     *acker
	ended    chan bool // one per message in flight when it ends: whether it met an outage
	inFlight int
	outage   bool
	poll     time.Duration
	timer    *time.Timer
}

// pause waits d, or until ctx ends, or (untilEnd) until a message in
// flight ends. Messages ending meanwhile are counted.
func (l *claimLoop) pause(ctx context.Context, d time.Duration, untilEnd bool) {
	l.timer.Reset(d)
	defer l.timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case outage := <-l.ended:
			l.inFlight--
			l.outage = l.outage || outage
			if untilEnd {
				return
			}
		case <-l.timer.C:
			return
		}
	}
}

// deliver handles one claimed message and settles it, on a context that
// outlives a stop by DrainTimeout. A message that cannot be settled is left
// to its visibility timeout: it is handed out again. It reports whether the
// handling met an outage.
func (q *Queue) deliver(ctx context.Context, c Claimed, handle transport.HandleFunc, acks *acker) (outage bool) {
	log := q.cfg.Logger.With("row", c.ID, "message_id", c.MessageID, "attempt", c.Attempt, "counted", c.Counted())
	if c.Exhausted {
		log.WarnContext(ctx, "dead-lettered: attempts exhausted", "max_attempts", q.cfg.MaxAttempts)
		return false
	}
	hctx, cancel := transport.DrainContext(ctx, q.cfg.DrainTimeout)
	defer cancel()
	d := handle(hctx, c.Inbound())
	outage = d.Action == transport.ActionRetry && transport.IsOutage(hctx, d)
	if d.Action == transport.ActionAck {
		acks.ack(c) // off this goroutine: the slot is free now
		return outage
	}
	if err := q.Settle(hctx, c, d); err != nil {
		log.WarnContext(ctx, "message not settled; it will be handed out again after its visibility timeout", "action", d.Action, "err", err)
	}
	return outage
}
