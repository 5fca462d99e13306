package simworld

import (
	"context"
	"errors"
	"net/http"
	"time"

	"opledger/adapters/provider"
	"opledger/domain"
)

// Timeouts of the provider calls, on the world's clock.
const (
	// sendTimeout is the client's per-send timeout (provider.Config.Timeout).
	sendTimeout = 10 * time.Second
	// workerCallTimeout is the worker's bound on one call, resends included
	// (worker.Config.ProviderTimeout).
	workerCallTimeout = 30 * time.Second
	// reconcilerCallTimeout is the reconciler's (ReconcilerConfig.CallTimeout).
	reconcilerCallTimeout = 15 * time.Second
)

// callShim is the domain.Provider a role is given: the real provider client,
// with the role's call timeout on the world's clock (a deadline the
// scheduler fires, cancelling the call's context exactly as the real timer
// would), and two places where the caller may stop for a while: before the
// request leaves, and after the answer came back (a GC pause, a freeze).
type callShim struct {
	w      *World
	p      *process
	name   string
	client *provider.Client
	net    *network
	// timeout is the caller's bound on the call, on the world's clock: the
	// one the role sets on the wall clock.
	timeout func() time.Duration
	current func() *thread
	// around the call of a worker: the lease renewal beside it.
	begin func()
	end   func()
}

// newClient returns the real provider client over n, its back-off timers on
// the world's clock. The client's jittered back-off (drawn from the global
// source) is replaced by one drawn from the seed.
func newClient(w *World, n *network) *provider.Client {
	c, err := provider.New(provider.Config{
		Profile:    w.profile,
		BaseURL:    "http://provider.sim",
		HTTPClient: &http.Client{Transport: n},
		Timeout:    time.Hour, // the real per-send timer never fires first: the network's, on the world's clock, does
		Now:        w.clock.Now,
		After: func(time.Duration) <-chan time.Time {
			t := n.current()
			if n.p.dead.Load() {
				return w.s.after(t, "", 0, false)
			}
			return w.s.after(t, "client back-off", w.rng.between(100*time.Millisecond, 5*time.Second), true)
		},
	})
	if err != nil {
		panic(err) // a constant configuration
	}
	return c
}

// CreateRefund implements domain.Provider.
func (c *callShim) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	if c.begin != nil {
		c.begin()
	}
	t := c.current()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	disarm := c.w.s.addDeadline(t, "provider call timeout", c.timeout(), cancel)
	if c.w.pause(c.p) {
		c.w.tracef(c.p, "%s stops before sending %s", c.name, req.IdempotencyKey)
		_, _ = c.w.s.gate(callCtx, t, &park{label: "before send " + string(req.IdempotencyKey), openable: true})
	}
	res := c.client.CreateRefund(callCtx, req)
	disarm()
	c.w.tracef(c.p, "%s create %s key %s → %s %s", c.name, req.OperationID, req.IdempotencyKey, res.Outcome, res.ProviderReference)
	if c.w.pause(c.p) {
		c.w.tracef(c.p, "%s stops after the answer", c.name)
		_, _ = c.w.s.gate(ctx, t, &park{label: "after answer " + string(req.IdempotencyKey), openable: true})
	}
	if c.end != nil {
		c.end()
	}
	return res
}

// LookupByReference implements domain.Provider.
func (c *callShim) LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	t := c.current()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	disarm := c.w.s.addDeadline(t, "provider lookup timeout", c.timeout(), cancel)
	effects, err := c.client.LookupByReference(callCtx, op)
	disarm()
	switch {
	case errors.Is(err, domain.ErrReadUnsupported):
		c.w.tracef(c.p, "%s lookup %s → not offered", c.name, op)
	case err != nil:
		c.w.tracef(c.p, "%s lookup %s → cannot tell", c.name, op)
	default:
		c.w.tracef(c.p, "%s lookup %s → %d refunds", c.name, op, len(effects))
	}
	return effects, err
}

// RetrieveByKey implements domain.Provider.
func (c *callShim) RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	t := c.current()
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	disarm := c.w.s.addDeadline(t, "provider retrieve timeout", c.timeout(), cancel)
	effect, found, err := c.client.RetrieveByKey(callCtx, key)
	disarm()
	switch {
	case errors.Is(err, domain.ErrReadUnsupported):
		c.w.tracef(c.p, "%s retrieve %s → not offered", c.name, key)
	case err != nil:
		c.w.tracef(c.p, "%s retrieve %s → cannot tell", c.name, key)
	case found:
		c.w.tracef(c.p, "%s retrieve %s → %s %s", c.name, key, effect.Reference, effect.State)
	default:
		c.w.tracef(c.p, "%s retrieve %s → none", c.name, key)
	}
	return effect, found, err
}
