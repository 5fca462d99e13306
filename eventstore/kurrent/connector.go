package kurrent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// connector owns the store's clients. The client library connects lazily
// and misbehaves around its first call and after a connection failure (see
// the package doc), so:
//
//   - a client is shared only after one probe has succeeded on it, and one
//     probe runs at a time: callers needing a client wait for the running
//     probe instead of starting their own;
//   - a client is retired (takes no new calls) at the first sign of a broken
//     connection, and the next call probes a fresh one;
//   - a client is closed only when no call is in flight on it, so Close
//     never races a call; one whose call never returns is never closed.
//
// It is safe for concurrent use.
type connector struct {
	// life bounds probes; it ends when the store is closed.
	life           context.Context
	newClient      func() (*esdb.Client, error)
	probe          func(ctx context.Context, es *esdb.Client) error
	connectTimeout time.Duration

	mu      sync.Mutex
	current *client       // the shared client; nil until a probe succeeds
	probing chan struct{} // closed when the running probe ends; nil if none runs
	lastErr error         // why the last probe failed
	open    map[*client]struct{}
	closed  bool
	idle    chan struct{} // closed once the connector is closed and no client is open
	isIdle  bool
}

// client is one client library instance and the calls in flight on it.
type client struct {
	es       *esdb.Client
	inflight int  // guarded by connector.mu
	retired  bool // guarded by connector.mu: no new calls; closed at inflight 0
}

func newConnector(life context.Context, newClient func() (*esdb.Client, error), probe func(context.Context, *esdb.Client) error, connectTimeout time.Duration) *connector {
	return &connector{
		life: life, newClient: newClient, probe: probe, connectTimeout: connectTimeout,
		open: map[*client]struct{}{}, idle: make(chan struct{}),
	}
}

// acquire returns the shared client with one more call counted in flight
// on it; the caller must release it. Without a shared client it waits for a
// probe (starting one if none runs) until ctx ends, and returns the probe's
// failure if it fails.
func (c *connector) acquire(ctx context.Context) (*client, error) {
	c.mu.Lock()
	if cl, ok, err := c.shareLocked(); ok {
		c.mu.Unlock()
		return cl, err
	}
	if c.probing == nil {
		c.probing = make(chan struct{})
		go c.runProbe(c.probing)
	}
	probing := c.probing
	c.mu.Unlock()

	select {
	case <-probing:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a connection: %w", context.Cause(ctx))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok, err := c.shareLocked(); ok {
		return cl, err
	}
	if c.lastErr != nil {
		return nil, c.lastErr
	}
	// The probed client was retired by another call before this one got it.
	return nil, errConnectionLost
}

// shareLocked hands out the shared client, or reports a closed connector;
// ok is false when there is neither.
func (c *connector) shareLocked() (cl *client, ok bool, err error) {
	switch {
	case c.closed:
		return nil, true, errClosed
	case c.current != nil:
		c.current.inflight++
		return c.current, true, nil
	}
	return nil, false, nil
}

// runProbe makes and probes a client, shares it if the probe succeeded,
// and closes done.
func (c *connector) runProbe(done chan struct{}) {
	es, err := c.probeNew()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastErr = err
	if es != nil {
		if c.closed {
			_ = es.Close() // nothing else ever held it
		} else {
			cl := &client{es: es}
			c.current = cl
			c.open[cl] = struct{}{}
		}
	}
	c.probing = nil
	close(done)
}

// probeNew makes a client and runs the probe on it, its first and only
// call, within connectTimeout. The client library does not honour the
// context while it connects, so the probe runs in a goroutine of its own; a
// client whose probe did not answer in time is closed once the probe has
// returned, never before.
func (c *connector) probeNew() (*esdb.Client, error) {
	es, err := c.newClient()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.life, c.connectTimeout)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- c.probe(ctx, es) }()
	select {
	case err := <-result:
		if err != nil {
			_ = es.Close() // its one call has returned
			return nil, fmt.Errorf("connect: %w", err)
		}
		return es, nil
	case <-ctx.Done():
		go func() {
			<-result
			_ = es.Close()
		}()
		return nil, fmt.Errorf("connect: %w (%s)", errConnectTimeout, c.connectTimeout)
	}
}

// release ends a call acquire counted.
func (c *connector) release(cl *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl.inflight--
	c.closeIfIdleLocked(cl)
}

// retire stops sharing cl: its connection failed. The next call probes a
// new client; cl is closed when its last call in flight ends.
func (c *connector) retire(cl *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current == cl {
		c.current = nil
	}
	cl.retired = true
	c.closeIfIdleLocked(cl)
}

// closeIfIdleLocked closes a retired client with no call in flight.
func (c *connector) closeIfIdleLocked(cl *client) {
	if !cl.retired || cl.inflight > 0 {
		return
	}
	if _, open := c.open[cl]; !open {
		return
	}
	delete(c.open, cl)
	_ = cl.es.Close() // no call in flight on it: Close cannot race one
	c.noteIdleLocked()
}

func (c *connector) noteIdleLocked() {
	if c.closed && len(c.open) == 0 && !c.isIdle {
		c.isIdle = true
		close(c.idle)
	}
}

// close retires every client, closing those with no call in flight, and
// waits up to wait for the others to finish theirs (the store cancels
// them first). A client whose call never returns stays open.
func (c *connector) close(wait time.Duration) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.current = nil
	for cl := range c.open {
		cl.retired = true
		c.closeIfIdleLocked(cl)
	}
	c.noteIdleLocked()
	c.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.idle:
	case <-t.C:
	}
}
