package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxAckBatch bounds the acknowledgements one statement carries (each is a
// row id and an attempt: a few bytes).
const maxAckBatch = 256

// ackTimeout bounds one acknowledgement statement: a row left unsettled is
// handed out again after its visibility timeout, so giving up is safe.
const ackTimeout = 30 * time.Second

// ackLinger is how long an acknowledgement waits for a claim to carry it
// (the claim loop claims once a quarter of Concurrency has ended: their
// acknowledgements go in the claim's statement, see Queue.claim) or for
// others to share a statement with: each statement is a commit, and
// commits are what a busy database runs out of first. Nothing waits on an
// acknowledgement but the row's visibility timeout (minutes).
const ackLinger = 10 * time.Millisecond

// acker acknowledges the messages one Consume handled, off the handlers'
// goroutines: a message's slot is free as soon as its handling ended (the
// ledger recorded it), and the acknowledgement follows, in the claim
// loop's next claim if one comes within ackLinger (take), else in a
// statement of its own shared with the others queued by then. Each keeps
// its own result: a message whose claim was lost (its attempt moved on) is
// not acknowledged (ErrClaimLost, logged), the others are. A message whose
// acknowledgement fails or never runs (a crash) is handed out again after
// its visibility timeout, and the ledger's inbox absorbs the copy:
// acknowledging later changes nothing a delivery guarantees.
type acker struct {
	q   *Queue
	log *slog.Logger

	mu      sync.Mutex
	room    *sync.Cond    // signalled when pending shrinks
	pending []*pendingAck // queued, oldest first; at most maxAckBatch (twice that after a requeue)
	closed  bool
	kick    chan struct{} // one ack queued (or stop): the loop looks
	done    chan struct{}
}

type pendingAck struct {
	c      Claimed
	done   chan error // nil: the acker logs the result
	queued time.Time  // when ack queued it
}

// startAcker starts the acknowledging goroutine; stop it with stop.
func startAcker(ctx context.Context, q *Queue, log *slog.Logger) *acker {
	a := &acker{q: q, log: log, kick: make(chan struct{}, 1), done: make(chan struct{})}
	a.room = sync.NewCond(&a.mu)
	go a.loop(context.WithoutCancel(ctx))
	return a
}

// ack queues c's acknowledgement under its claim (its attempt). It waits
// while maxAckBatch are queued (the loop sends them at once).
func (a *acker) ack(c Claimed) {
	a.mu.Lock()
	for len(a.pending) >= maxAckBatch {
		a.room.Wait()
	}
	a.pending = append(a.pending, &pendingAck{c: c, queued: time.Now()})
	first, full := len(a.pending) == 1, len(a.pending) >= maxAckBatch
	a.mu.Unlock()
	if first || full {
		a.wake()
	}
}

// wake tells the loop to look again.
func (a *acker) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// take removes and returns what is queued, at most maxAckBatch, oldest
// first: for a claim to carry, or for the loop's own statement.
func (a *acker) take() []*pendingAck {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := min(len(a.pending), maxAckBatch)
	if n == 0 {
		return nil
	}
	batch := slices.Clone(a.pending[:n])
	a.pending = slices.Delete(a.pending, 0, n)
	a.room.Broadcast()
	return batch
}

// requeue puts batch back at the head of the queue, for the loop's own
// statement: a claim that carried it failed, so its acknowledgements may
// not have run (when they did, running them again answers them as
// acknowledged: an acknowledgement is idempotent under its claim).
func (a *acker) requeue(batch []*pendingAck) {
	if len(batch) == 0 {
		return
	}
	a.mu.Lock()
	a.pending = append(slices.Clone(batch), a.pending...)
	a.mu.Unlock()
	a.wake()
}

// due returns how long until the oldest queued acknowledgement has waited
// ackLinger (zero or less: due now, or a statement's worth is queued, or
// stop was asked), and whether any is queued.
func (a *acker) due() (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) == 0 {
		return 0, false
	}
	if a.closed || len(a.pending) >= maxAckBatch {
		return 0, true
	}
	return ackLinger - time.Since(a.pending[0].queued), true
}

// stop acknowledges what is queued and returns once it is done.
func (a *acker) stop() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.wake()
	<-a.done
}

func (a *acker) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

// loop sends, in statements of their own, the acknowledgements that waited
// ackLinger with no claim taking them (each claim takes what is queued, so
// the wait starts again from the oldest one left).
func (a *acker) loop(ctx context.Context) {
	defer close(a.done)
	timer := time.NewTimer(ackLinger)
	timer.Stop()
	defer timer.Stop()
	for {
		wait, queued := a.due()
		switch {
		case !queued && a.isClosed():
			return
		case !queued:
			<-a.kick // the first one queued, or stop
			continue
		case wait > 0:
			timer.Reset(wait)
			select {
			case <-a.kick:
			case <-timer.C:
			}
			timer.Stop()
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, ackTimeout)
		a.run(rctx, a.take())
		cancel()
	}
}

// ackColumns is batch's row ids and claim attempts, the statement's arrays.
func ackColumns(batch []*pendingAck) ([]int64, []int32) {
	ids := make([]int64, len(batch))
	attempts := make([]int32, len(batch))
	for i, p := range batch {
		ids[i], attempts[i] = p.c.ID, int32(p.c.Attempt)
	}
	return ids, attempts
}

// run acknowledges batch in one statement and answers each.
func (a *acker) run(ctx context.Context, batch []*pendingAck) {
	ids, attempts := ackColumns(batch)
	rows, err := a.q.cfg.DB.Query(ctx, a.q.sql.ackBatch, ids, attempts)
	var acked []int64
	if err == nil {
		acked, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	a.answer(ctx, batch, acked, err)
}

// answer tells each of batch its result: err when the statement failed,
// else acknowledged when its id is in acked, ErrClaimLost otherwise.
func (a *acker) answer(ctx context.Context, batch []*pendingAck, acked []int64, err error) {
	for _, p := range batch {
		var result error
		switch {
		case err != nil:
			result = fmt.Errorf("settle row %d (ack): %w", p.c.ID, err)
		case !slices.Contains(acked, p.c.ID):
			result = fmt.Errorf("settle row %d (ack) attempt %d: %w", p.c.ID, p.c.Attempt, ErrClaimLost)
		}
		if p.done != nil {
			p.done <- result
		} else if result != nil {
			a.log.WarnContext(ctx, "message not acknowledged; it will be handed out again after its visibility timeout",
				"row", p.c.ID, "message_id", p.c.MessageID, "err", result)
		}
	}
}
