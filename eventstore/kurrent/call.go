package kurrent

import (
	"context"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// call runs fn on the shared client and returns within CallTimeout, waiting
// for a connection included, even if the client library does not: fn runs
// in a goroutine of its own, which keeps the client counted in flight until
// fn returns, however late. A failure that the caller's context does not
// explain and that means a broken connection retires the client. The error
// has been through interpretError; a call on an ended context fails at once
// with eventstore.ErrUnavailable.
//
// fn must honour its context and must not retain es. What fn writes outside
// itself may be read only when call returns nil (then fn has returned).
func (s *Store) call(ctx context.Context, op string, fn func(ctx context.Context, es *esdb.Client) error) error {
	if err := ctx.Err(); err != nil {
		return eventstore.Unavailable(op, err)
	}
	callCtx, cancel := context.WithTimeoutCause(ctx, s.cfg.CallTimeout, fmt.Errorf("%w (%s)", errCallTimeout, s.cfg.CallTimeout))
	defer cancel()
	defer context.AfterFunc(s.life, cancel)() // Close ends calls in flight

	cl, err := s.conn.acquire(callCtx)
	if err != nil {
		return interpretError(op, err)
	}
	done := make(chan error, 1)
	go func() {
		defer s.conn.release(cl)
		done <- fn(callCtx, cl.es)
	}()
	select {
	case err = <-done:
	case <-callCtx.Done():
		err = context.Cause(callCtx)
	}
	if err != nil && ctx.Err() == nil && isConnectionFailure(err) {
		s.conn.retire(cl)
	}
	return interpretError(op, err)
}
