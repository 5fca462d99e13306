package transport

import (
	"context"
	"time"
)

// DrainContext returns a context for handling one message that outlives ctx
// by at most drain: stopping a Source (ctx ends) lets the message in flight
// finish and be acknowledged rather than cut its provider call short (which
// would leave an Unknown outcome for reconciliation), yet bounds how long a
// stop takes. Call the CancelFunc when the message is settled.
func DrainContext(ctx context.Context, drain time.Duration) (context.Context, context.CancelFunc) {
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// Once ctx ends, cancel after drain; a timer left pending after the
	// message settled only cancels an already cancelled context.
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(drain, cancel) })
	return hctx, func() {
		stop()
		cancel()
	}
}
