package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"opledger/adapters/transport"
)

// Consume implements transport.Source. Concurrency handlers take messages
// from one claim loop, which also claims a few ahead of them (see ahead):
// about as many as the handlers finish during four claims' round trips, so
// that a handler that finishes takes the next message at once instead of
// waiting for a claim, while a slow provider (long handlings) leaves next
// to nothing claimed ahead, for other workers to take. The loop claims as
// many as it has room for in one statement (at most one message per key,
// see Claim), once at least a quarter of Concurrency is free, so that a
// busy queue costs one claim per several messages and an idle one polls
// once per pause, not once per slot. Each message is settled as its
// disposition says when its handling ends; the acknowledgements of the
// messages that ended go in the next claim's statement, or, when none
// comes within ackLinger, share one of their own, sent off the handlers'
// goroutines (see acker); a settle that fails is tried again until the
// database answers (settleHandled). Before its first claim a
// Consume gives back the rows an earlier process under its WorkerID died
// holding claimed (giveBack). A claim that finds nothing pauses the
// loop (PollMin doubling to PollMax, cut short when a message in flight
// ends or this Queue publishes); so does a message that met an outage of
// the ledger's store, rather than claiming more into the outage. When ctx
// ends, no more is claimed, messages being handled get DrainTimeout to
// finish and settle, those claimed ahead and not started are given back
// (visible again at once, the claim not counted against them), and Consume
// returns ctx.Err(). MaxClaimFailures failed claims in a row make Consume
// return that error once the messages in flight are settled.
func (q *Queue) Consume(ctx context.Context, handle transport.HandleFunc) error {
	if q.cfg.WorkerID == "" {
		return errors.New("pgqueue: consume: WorkerID is required")
	}
	log := q.cfg.Logger.With("claimer", q.cfg.WorkerID, "topic", q.cfg.Topic)
	most := q.cfg.Concurrency + maxAhead(q.cfg.Concurrency) // held at most
	l := &claimLoop{q: q, acks: startAcker(ctx, q, log), ended: make(chan ending, most), poll: q.cfg.PollMin, holding: map[int64]bool{}, inherited: true}
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	defer l.timer.Stop()
	// work holds the messages claimed ahead; with held <= most, a send waits
	// at most for a handler to take the previous one.
	work := make(chan Claimed, maxAhead(q.cfg.Concurrency))
	var (
		handlers sync.WaitGroup
		released = make(chan Claimed, most) // claimed, not started: ctx ended first
	)
	for range q.cfg.Concurrency {
		handlers.Go(func() {
			for c := range work {
				if ctx.Err() != nil {
					released <- c
					l.ended <- ending{id: c.ID}
					continue
				}
				t0 := time.Now()
				outage := q.deliver(ctx, c, handle, l.acks)
				l.ended <- ending{id: c.ID, outage: outage, took: time.Since(t0)}
			}
		})
	}
	defer func() {
		close(work)
		handlers.Wait() // every message being handled ends within DrainTimeout
		for ; l.held > 0; l.held-- {
			<-l.ended
		}
		close(released)
		q.release(context.WithoutCancel(ctx), released, log)
		l.acks.stop() // then the acknowledgements go out
	}()
	refill := max(1, q.cfg.Concurrency/4)
	for failures := 0; ctx.Err() == nil; {
		if l.outage {
			// A message met an outage of the ledger's store: pause rather
			// than claim more into it.
			l.outage = false
			l.pause(ctx, l.poll, false, nil)
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		l.collect()
		if l.inherited && !l.giveBack(ctx, log) {
			l.pause(ctx, l.poll, false, nil) // the store is out: the claim would fail too
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		if !l.lostAt.IsZero() && !l.reclaim(ctx, log) {
			l.pause(ctx, l.poll, false, nil) // the store is still out: the claim would fail too
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		free := q.cfg.Concurrency + l.ahead() - l.held
		if free < refill && l.held > 0 {
			l.pause(ctx, time.Hour, true, nil) // until a message ends (bounded by DrainTimeout and ctx)
			continue
		}
		wake := q.published.wait() // before the claim: a publish during it counts
		t0 := time.Now()
		acks := l.acks.take() // the messages that ended: acknowledged in the claim's commit
		claimed, acked, err := q.claim(ctx, q.cfg.WorkerID, free, acks)
		if err != nil {
			l.acks.requeue(acks) // for the acker's own statement
		} else {
			l.acks.answer(ctx, acks, acked, nil)
		}
		if ctx.Err() != nil && len(claimed) == 0 {
			break
		}
		if err != nil {
			failures++
			if failures >= q.cfg.MaxClaimFailures {
				return fmt.Errorf("pgqueue: %d consecutive failed claims: %w", failures, err)
			}
			log.WarnContext(ctx, "claim failed", "err", err, "failures", failures)
			if l.lostAt.IsZero() {
				l.lostAt = t0 // its answer may be lost with rows it claimed: reclaim them first
			}
			l.pause(ctx, l.poll, false, nil)
			l.poll = min(2*l.poll, q.cfg.PollMax)
			continue
		}
		failures = 0
		l.claiming = average(l.claiming, time.Since(t0))
		for _, c := range claimed {
			if c.Exhausted {
				q.deliver(ctx, c, handle, l.acks) // dead-lettered by the claim: only logged
				continue
			}
			l.held++
			l.holding[c.ID] = true
			work <- c
		}
		switch {
		case len(claimed) == 0:
			// Nothing ready: pause, doubling, unless this Queue publishes.
			l.pause(ctx, l.poll, false, wake)
			l.poll = min(2*l.poll, q.cfg.PollMax)
		case len(claimed) < free:
			// Fewer ready than there was room for: look again when one
			// ends, or after PollMin.
			l.poll = q.cfg.PollMin
			l.pause(ctx, q.cfg.PollMin, true, wake)
		default:
			l.poll = q.cfg.PollMin
		}
	}
	return ctx.Err()
}

// maxAhead bounds the messages a Consume claims ahead of its handlers: as
// many again as Concurrency.
func maxAhead(concurrency int) int { return concurrency }

// ahead is how many messages to claim ahead of the handlers: as many as
// they finish, all busy, during four claims' round trips (by the averages
// so far; claims' times vary), at most maxAhead, which is also the answer
// until both averages exist. A claim is sent once a quarter of Concurrency
// is free, and what was claimed ahead keeps every handler busy while its
// round trip runs, even when a whole wave of handlings ends at once
// (measured with a zero-latency provider, handlings of about 15 ms and
// claims of about 4 ms: with nothing claimed ahead, a 32-slot worker fed
// by the relay had 19 messages in flight on average; claiming ahead, 30 to
// 32). With a provider that answers in 300 ms and claims of 5 ms, it is
// three messages: the rest of a burst is left for other workers.
func (l *claimLoop) ahead() int {
	c := l.q.cfg.Concurrency
	if l.claiming <= 0 || l.handling <= 0 {
		return maxAhead(c)
	}
	n := (4*int64(c)*int64(l.claiming) + int64(l.handling) - 1) / int64(l.handling)
	return int(min(n, int64(maxAhead(c))))
}

// average folds d into the running average avg (zero: none yet), an
// exponentially weighted one that follows the last few dozen values.
func average(avg, d time.Duration) time.Duration {
	if avg <= 0 {
		return d
	}
	return avg + (d-avg)/16
}

// release gives back the messages claimed ahead and never started: visible
// again at once, the claim not counted against them (as an outage's). A
// message not given back (the statement failed) is handed out again after
// its visibility timeout.
func (q *Queue) release(ctx context.Context, msgs <-chan Claimed, log *slog.Logger) {
	var ids []int64
	var attempts []int32
	for c := range msgs {
		ids, attempts = append(ids, c.ID), append(attempts, int32(c.Attempt))
	}
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	if _, err := q.cfg.DB.Exec(ctx, q.sql.release, ids, attempts); err != nil {
		log.WarnContext(ctx, "messages claimed ahead not given back; they will be handed out again after their visibility timeout",
			"rows", ids, "err", err)
	}
}

// reclaim gives back the rows a failed claim may have taken without its
// answer arriving (the connection died after the commit: a failover, a
// network cut): rows this claimer holds hidden for about the visibility
// timeout that are not in flight here, visible again at once and the claim
// uncounted. Without it they would wait out the visibility timeout. Rows
// of another Consume under the same WorkerID may be given back too: they
// are handed out again, and the ledger fences the second claim. It
// reports whether the statement ran (false: the store is still out).
func (l *claimLoop) reclaim(ctx context.Context, log *slog.Logger) bool {
	q := l.q
	ids := make([]int64, 0, len(l.holding))
	for id := range l.holding {
		ids = append(ids, id)
	}
	// Claimed no earlier than lostAt: hidden until lostAt+timeout at least,
	// less a second for the clocks' and the round trips' slack.
	hidden := q.cfg.VisibilityTimeout - time.Since(l.lostAt) - time.Second
	if hidden <= 0 {
		l.lostAt = time.Time{} // visible again already
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	tag, err := q.cfg.DB.Exec(ctx, q.sql.reclaim, q.cfg.Topic, q.cfg.WorkerID, ids,
		float64(hidden.Milliseconds()), float64((q.cfg.VisibilityTimeout + time.Second).Milliseconds()))
	if err != nil {
		return false
	}
	if n := tag.RowsAffected(); n > 0 {
		log.InfoContext(ctx, "claim answer lost: the rows it took are visible again", "rows", n)
	}
	l.lostAt = time.Time{}
	return true
}

// giveBack makes visible at once the rows an earlier process under this
// WorkerID died holding claimed (SIGKILL, a crash, a lost machine), before
// this Consume's first claim: without it they would wait out their
// visibility timeout, and their operations with them, though nothing is
// handling them. Their claims stay counted. A row that another live
// process under the same WorkerID is handling is handed out again too; the
// ledger absorbs the copy (DuplicateDelivery) or fences the second claim.
// It reports whether the statement ran (false: the store is out).
func (l *claimLoop) giveBack(ctx context.Context, log *slog.Logger) bool {
	q := l.q
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	tag, err := q.cfg.DB.Exec(ctx, q.sql.giveBack, q.cfg.Topic, q.cfg.WorkerID)
	if err != nil {
		return false
	}
	if n := tag.RowsAffected(); n > 0 {
		log.InfoContext(ctx, "an earlier process under this worker id died holding claimed rows: they are visible again", "rows", n)
	}
	l.inherited = false
	return true
}

// claimLoop is Consume's state.
type claimLoop struct {
	q        *Queue
	acks     *acker
	ended    chan ending // one per message held when it ends (or is given back)
	held     int         // messages claimed and not ended: being handled or claimed ahead
	outage   bool
	poll     time.Duration
	timer    *time.Timer
	claiming time.Duration // average round trip of a claim that did not fail
	handling time.Duration // average handling of one message, settling included
	// holding are the rows held (ids); lostAt is when the first of the
	// claims that failed since the last reclaim started (zero: none).
	holding map[int64]bool
	lostAt  time.Time
	// inherited: the rows an earlier process under this WorkerID held
	// claimed are not given back yet (giveBack).
	inherited bool
}

// ending is what a handler says of a message held: whether its handling
// met an outage, and how long it took (zero: given back unhandled).
type ending struct {
	id     int64
	outage bool
	took   time.Duration
}

// end counts a message that ended.
func (l *claimLoop) end(e ending) {
	l.held--
	delete(l.holding, e.id)
	l.outage = l.outage || e.outage
	if e.took > 0 {
		l.handling = average(l.handling, e.took)
	}
}

// collect counts the messages that ended since the loop last looked
// (during a claim, say), so that the next claim takes every free slot.
func (l *claimLoop) collect() {
	for {
		select {
		case e := <-l.ended:
			l.end(e)
		default:
			return
		}
	}
}

// pause waits d, or until ctx ends, or (untilEnd) until a message in
// flight ends, or until wake fires (nil: never). Messages ending meanwhile
// are counted.
func (l *claimLoop) pause(ctx context.Context, d time.Duration, untilEnd bool, wake <-chan struct{}) {
	l.timer.Reset(d)
	defer l.timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-l.ended:
			l.end(e)
			if untilEnd {
				return
			}
		case <-wake:
			return
		case <-l.timer.C:
			return
		}
	}
}

// deliver handles one claimed message and settles it, on a context that
// outlives a stop by DrainTimeout; a settle that fails is tried again
// (settleHandled). A message that cannot be settled is left to its
// visibility timeout: it is handed out again. It reports whether the
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
	q.settleHandled(hctx, c, d, log)
	return outage
}
