package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"opledger/domain"
	"opledger/eventstore"
)

// heldLease renews an execution's lease every third of its length until
// stopped. Its ctx is the lease-loss context: cancelled the moment the lease
// is known lost (a renewal refused with lease.lost) or can no longer be
// vouched for (renewals failing until the lease's own expiry). Cancelling it
// stops the provider client from starting any further send; it cannot recall
// a request already on the wire.
type heldLease struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	lost   bool
}

func (w *Worker) holdLease(parent context.Context, op domain.OperationID, c *domain.Claimed, log *slog.Logger) *heldLease {
	ctx, cancel := context.WithCancel(parent)
	l := &heldLease{ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		expires := c.LeaseExpiresAt
		every := w.cfg.LeaseDuration / 3
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.cfg.After(every):
			}
			renewed, err := w.cfg.Ledger.RenewLease(ctx, op, domain.RenewLease{
				ExecutionID: c.ExecutionID, LeaseEpoch: c.LeaseEpoch, WorkerID: w.cfg.ID, LeaseDuration: w.cfg.LeaseDuration,
			})
			if err == nil {
				expires = renewed.LeaseExpiresAt
				continue
			}
			if ctx.Err() != nil {
				return
			}
			var refusal *domain.Refusal
			if errors.As(err, &refusal) || !w.cfg.Clock.Now().Before(expires) {
				log.WarnContext(ctx, "lease lost: no further provider request will start", "execution_id", c.ExecutionID, "err", err)
				l.markLost()
				return
			}
			log.WarnContext(ctx, "lease renewal failed; retrying until the lease expires", "execution_id", c.ExecutionID, "err", err)
		}
	}()
	return l
}

func (l *heldLease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.cancel()
}

// stop ends renewals and reports whether the lease was lost before.
func (l *heldLease) stop() bool {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func isUnavailable(err error) bool { return errors.Is(err, eventstore.ErrUnavailable) }
