package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// heldLease renews an execution's lease every third of its length until
// stopped. Its ctx is the lease-loss context: cancelled the moment the lease
// is known lost (a renewal refused) or can no longer be vouched for
// (renewals failing until the lease's own expiry). Cancelling it stops the
// provider client from starting any further send; it cannot recall a request
// already on the wire.
type heldLease struct {
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	lost    bool
	expires time.Time // the lease's expiry as last confirmed by the ledger
}

func (w *Worker) holdLease(parent context.Context, op domain.OperationID, c *domain.Claimed, secret string, log *slog.Logger) *heldLease {
	ctx, cancel := context.WithCancel(parent)
	l := &heldLease{ctx: ctx, cancel: cancel, done: make(chan struct{}), expires: c.LeaseExpiresAt}
	go func() {
		defer close(l.done)
		every := w.cfg.LeaseDuration / 3
		// Bounded by the lease: the loop ends when ctx ends (the provider
		// call returned), when a renewal is refused, or when renewals kept
		// failing until the lease expired.
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.cfg.After(every):
			}
			renewed, err := w.cfg.Ledger.RenewLease(ctx, op, domain.RenewLease{
				ExecutionID: c.ExecutionID, LeaseEpoch: c.LeaseEpoch, LeaseSecret: secret, WorkerID: w.cfg.ID,
				LeaseDuration: w.cfg.LeaseDuration,
			}, ledger.Cause{Actor: w.cfg.ID})
			if err == nil {
				l.extend(renewed.LeaseExpiresAt)
				continue
			}
			if ctx.Err() != nil {
				return
			}
			var refusal *domain.Refusal
			if errors.As(err, &refusal) || !w.cfg.Clock.Now().Before(l.expiry()) {
				log.WarnContext(ctx, "lease lost: no further provider request will start", "execution_id", c.ExecutionID, "err", err)
				l.markLost()
				return
			}
			log.WarnContext(ctx, "lease renewal failed; retrying until the lease expires", "execution_id", c.ExecutionID, "err", err)
		}
	}()
	return l
}

func (l *heldLease) extend(to time.Time) {
	l.mu.Lock()
	l.expires = to
	l.mu.Unlock()
}

func (l *heldLease) expiry() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expires
}

func (l *heldLease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
	l.cancel()
}

// stop ends renewals and reports whether the lease was lost before, and its
// expiry as last confirmed.
func (l *heldLease) stop() (lost bool, expires time.Time) {
	l.cancel()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.expires
}

// transient reports whether err may go away by itself: the store unreachable
// (or an append's outcome unknown: resending is safe, the handler resends the
// same event ids) or contention beyond the handler's own retries.
func transient(err error) bool {
	return errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, ledger.ErrContention)
}
