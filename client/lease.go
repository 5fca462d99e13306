package client

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// RenewLease renews x's lease once: POST /v1/executions/{id}/lease with its
// epoch and secret, for Config.LeaseDuration. On success x's expiry moves
// on. A 409 (lease.lost, lease.not-held) means stop at once: cancel the
// executor's call and start no further request.
func (c *Client) RenewLease(ctx context.Context, x *Execution) error {
	secret, err := x.leaseSecret()
	if err != nil {
		return err
	}
	body := mustJSON(map[string]any{
		"lease_epoch": x.LeaseEpoch, "lease_secret": secret, "worker_id": c.cfg.WorkerID,
		"lease_seconds": int64(c.cfg.LeaseDuration / time.Second),
	})
	var a struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	sent := c.cfg.Now()
	if err := c.do(ctx, "POST", "/v1/executions/"+x.ExecutionID+"/lease", body, &a); err != nil {
		return fmt.Errorf("renew lease of %s: %w", x.ExecutionID, err)
	}
	x.setExpiry(a.LeaseExpiresAt, sent.Add(c.cfg.LeaseDuration))
	return nil
}

// Lease keeps an execution's lease while its executor runs (KeepLease).
type Lease struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu   sync.Mutex
	lost error
}

// KeepLease renews x's lease in the background, every third of
// Config.LeaseDuration, until Stop or ctx ends. Its Context is the one to
// run the executor's call under: it is cancelled the moment the lease is
// lost — a renewal refused (409 lease.lost or lease.not-held, or any other
// refusal) or renewals failing (503, no answer) until the lease's deadline
// by this process's clock — with the reason as its cause
// (context.Cause). Cancelling stops any further send; it cannot recall a
// request already on the wire.
func (c *Client) KeepLease(ctx context.Context, x *Execution) *Lease {
	lctx, cancel := context.WithCancelCause(ctx)
	l := &Lease{ctx: lctx, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.run(c, x)
	}()
	return l
}

// run renews until l.ctx ends (Stop, or the caller's context), a renewal is
// refused, or the deadline passes without a confirmed renewal: each bounds
// the loop, and a confirmed renewal moves the deadline by one lease only.
func (l *Lease) run(c *Client, x *Execution) {
	every := c.cfg.LeaseDuration / 3
	wait, backoff := every, c.cfg.RetryBackoff
	for {
		if !c.wait(l.ctx, wait) {
			return
		}
		// A renewal that hangs must not outlive the lease it renews.
		rctx, cancel := context.WithDeadline(l.ctx, x.Deadline())
		err := c.RenewLease(rctx, x)
		cancel()
		if l.ctx.Err() != nil {
			return
		}
		if err == nil {
			wait, backoff = every, c.cfg.RetryBackoff
			continue
		}
		left := x.Deadline().Sub(c.cfg.Now())
		switch {
		case !retryable(err):
			c.log.WarnContext(l.ctx, "lease lost: no further request will start", "execution", x, "err", err)
			l.lose(err)
			return
		case left <= 0:
			c.log.WarnContext(l.ctx, "lease expired unconfirmed: no further request will start", "execution", x, "err", err)
			l.lose(fmt.Errorf("%w: %w", ErrLeaseExpired, err))
			return
		}
		c.log.WarnContext(l.ctx, "lease renewal failed; retrying until the lease's deadline", "execution", x, "left", left, "err", err)
		wait, backoff = min(c.pauseFor(err, backoff), left), min(2*backoff, c.cfg.RetryBackoffMax)
	}
}

func (l *Lease) lose(err error) {
	l.mu.Lock()
	l.lost = err
	l.mu.Unlock()
	l.cancel(err)
}

// Context is cancelled when the lease is lost, when Stop is called, or when
// the context KeepLease was given ends.
func (l *Lease) Context() context.Context { return l.ctx }

// Lost is nil while the lease is held, then why it was lost: an *Error
// (a refusal: errors.Is(err, ErrLeaseLost), ErrLeaseNotHeld, …) or an error
// wrapping ErrLeaseExpired.
func (l *Lease) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Stop ends the renewals, waits for the one in flight, and returns Lost().
func (l *Lease) Stop() error {
	l.cancel(context.Canceled)
	<-l.done
	return l.Lost()
}
