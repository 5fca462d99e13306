package pgqueue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"opledger/adapters/transport"
	"opledger/domain/clock"
)

// settleHandled settles a message its handler is done with, as d says
// (Settle), and tries again while the statement fails, pausing PollMin
// doubling to PollMax. A restart of the queue's database ends every
// session of the pool, and a settle sent on one of them fails: given up at
// once, the row would stay hidden for the rest of its visibility timeout
// (minutes) while nothing is wrong with it, and its operation would wait
// that long for its request. It gives up when the claim no longer holds
// (an earlier try committed and lost its answer, or the row was handed out
// again), when ctx ends (DrainTimeout after a stop), or when the claim's
// visibility timeout is over (the row is handed out again anyway). Running
// a try again after one that committed and lost its answer is harmless for
// a Retry or a dead letter (the row is found as that try left it, or the
// claim is found lost); an outage's settle then counts one more claim as
// uncounted, which only a failure of the queue's own database can cause.
func (q *Queue) settleHandled(ctx context.Context, c Claimed, d transport.Disposition, log *slog.Logger) {
	outage := transport.IsOutage(ctx, d) // decided on the handling's context, before the retries' deadline
	until := c.hiddenUntil
	if until.IsZero() {
		until = time.Now().Add(q.cfg.VisibilityTimeout)
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	wait := q.cfg.PollMin
	for try := 1; ; try++ {
		err := q.settle(ctx, c, d, outage)
		switch {
		case err == nil:
			if try > 1 {
				log.InfoContext(ctx, "message settled once the queue's database answered", "action", d.Action, "tries", try)
			}
			return
		case errors.Is(err, ErrClaimLost) && try > 1:
			log.InfoContext(ctx, "message settled by an earlier try whose answer was lost, or handed out again", "action", d.Action, "tries", try)
			return
		case errors.Is(err, ErrClaimLost), ctx.Err() != nil:
			log.WarnContext(ctx, "message not settled; it will be handed out again after its visibility timeout", "action", d.Action, "tries", try, "err", err)
			return
		case try == 1:
			log.WarnContext(ctx, "message not settled; trying again until the queue's database answers", "action", d.Action, "err", err)
		}
		if !clock.Sleep(ctx, wait) {
			log.WarnContext(ctx, "message not settled; it will be handed out again after its visibility timeout", "action", d.Action, "tries", try, "err", err)
			return
		}
		wait = min(2*wait, q.cfg.PollMax)
	}
}
