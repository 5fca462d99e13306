package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
)

// maxAckBatch bounds the acknowledgements one statement carries (each is a
// row id and an attempt: a few bytes).
const maxAckBatch = 256

// acker acknowledges messages, sharing one statement among the messages
// whose handling ended while the previous statement ran: the first
// acknowledgement after a quiet moment runs at once on its caller's
// goroutine, the ones arriving meanwhile wait for it and then go together.
// Each keeps its own result: a message whose claim was lost (its attempt
// moved on) gets ErrClaimLost, the others are acknowledged. At most one
// statement runs at a time per Consume.
type acker struct {
	q       *Queue
	mu      sync.Mutex
	queue   []*pendingAck
	running bool
}

type pendingAck struct {
	c    Claimed
	done chan error // buffered
}

func newAcker(q *Queue) *acker { return &acker{q: q} }

// ack acknowledges c under its claim (its attempt).
func (a *acker) ack(ctx context.Context, c Claimed) error {
	p := &pendingAck{c: c, done: make(chan error, 1)}
	a.mu.Lock()
	a.queue = append(a.queue, p)
	if a.running {
		a.mu.Unlock()
		select {
		case err := <-p.done:
			return err
		case <-ctx.Done():
			// Left in the queue: the next statement acknowledges it or
			// finds its claim lost; either way nothing is lost.
			return fmt.Errorf("acknowledge row %d: %w", c.ID, ctx.Err())
		}
	}
	a.running = true
	a.mu.Unlock()
	for { // this caller runs statements until the queue is empty: bounded by the callers waiting
		a.mu.Lock()
		n := min(len(a.queue), maxAckBatch)
		batch := slices.Clone(a.queue[:n])
		a.queue = slices.Delete(a.queue, 0, n)
		if n == 0 {
			a.running = false
			a.mu.Unlock()
			break
		}
		a.mu.Unlock()
		a.run(context.WithoutCancel(ctx), batch)
	}
	return <-p.done
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
		switch {
		case err != nil:
			p.done <- fmt.Errorf("settle row %d (ack): %w", p.c.ID, err)
		case slices.Contains(acked, p.c.ID):
			p.done <- nil
		default:
			p.done <- fmt.Errorf("settle row %d (ack) attempt %d: %w", p.c.ID, p.c.Attempt, ErrClaimLost)
		}
	}
}
