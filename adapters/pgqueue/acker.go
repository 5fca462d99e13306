package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxAckBatch bounds the acknowledgements one statement carries (each is a
// row id and an attempt: a few bytes).
const maxAckBatch = 256

// ackTimeout bounds one acknowledgement statement: a row left unsettled is
// handed out again after its visibility timeout, so giving up is safe.
const ackTimeout = 30 * time.Second

// ackLinger is how long the first acknowledgement of a statement waits for
// others (unless a quarter of Concurrency has come in before): each
// statement is a commit, and commits are what a busy database runs out of
// first. Nothing waits on an acknowledgement but the row's visibility
// timeout (minutes).
const ackLinger = 10 * time.Millisecond

// acker acknowledges the messages one Consume handled, off the handlers'
// goroutines: a message's slot is free as soon as its handling ended (the
// ledger recorded it), and the acknowledgement follows, sharing one
// statement with the others that come in within ackLinger. Each keeps its own result: a message whose claim was lost (its
// attempt moved on) is not acknowledged (ErrClaimLost, logged), the others
// are. A message whose acknowledgement fails or never runs (a crash) is
// handed out again after its visibility timeout, and the ledger's inbox
// absorbs the copy: acknowledging later changes nothing a delivery
// guarantees.
type acker struct {
	q    *Queue
	log  *slog.Logger
	in   chan *pendingAck // bounded: Concurrency handlers, one each at a time
	done chan struct{}
}

type pendingAck struct {
	c    Claimed
	done chan error // nil: the acker logs the result
}

// startAcker starts the acknowledging goroutine; stop it with stop.
func startAcker(ctx context.Context, q *Queue, log *slog.Logger) *acker {
	a := &acker{q: q, log: log, in: make(chan *pendingAck, q.cfg.Concurrency), done: make(chan struct{})}
	go a.loop(context.WithoutCancel(ctx))
	return a
}

// ack queues c's acknowledgement under its claim (its attempt).
func (a *acker) ack(c Claimed) { a.in <- &pendingAck{c: c} }

// stop acknowledges what is queued and returns once it is done.
func (a *acker) stop() {
	close(a.in)
	<-a.done
}

func (a *acker) loop(ctx context.Context) {
	defer close(a.done)
	enough := max(1, a.q.cfg.Concurrency/4)
	linger := time.NewTimer(ackLinger)
	defer linger.Stop()
	for p := range a.in {
		batch := []*pendingAck{p}
		linger.Reset(ackLinger)
	gather:
		for len(batch) < maxAckBatch {
			if len(batch) >= enough {
				// Enough for one statement: take what else is queued, no more waiting.
				select {
				case more, ok := <-a.in:
					if !ok {
						break gather
					}
					batch = append(batch, more)
					continue
				default:
					break gather
				}
			}
			select {
			case more, ok := <-a.in:
				if !ok {
					break gather
				}
				batch = append(batch, more)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
		rctx, cancel := context.WithTimeout(ctx, ackTimeout)
		a.run(rctx, batch)
		cancel()
	}
}

// run acknowledges batch in one statement and answers each.
func (a *acker) run(ctx context.Context, batch []*pendingAck) {
	ids := make([]int64, len(batch))
	attempts := make([]int32, len(batch))
	for i, p := range batch {
		ids[i], attempts[i] = p.c.ID, int32(p.c.Attempt)
	}
	rows, err := a.q.cfg.DB.Query(ctx, a.q.sql.ackBatch, ids, attempts)
	var acked []int64
	if err == nil {
		acked, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
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
