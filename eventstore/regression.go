package eventstore

import "context"

// Regression is what a cache or cursor that remembers the log saw when it
// found the store holding less than it had seen: a stream shorter than a
// version it read or wrote, another event where it knew one (a stream or
// a log rewritten after going back), a log that ends before its
// checkpoint. A failover to a standby that had not received the last
// commits (an asynchronous standby) does this: acknowledged writes are
// gone. Whoever notices drops what it remembered and reads again; the
// observer records the evidence and raises the alarm.
type Regression struct {
	// Cache names the cache or cursor that noticed (the label of
	// opledger_log_regressions_total: state_cache, head_cache, ...).
	Cache string
	// Stream is the stream that went back; "" for the global log.
	Stream string
	// SeenVersion is the version the cache remembered (NoStreamVersion for
	// the global log) and SeenEventID the event it knew there (or at
	// SeenPosition).
	SeenVersion int64
	SeenEventID string
	// HeldVersion is the stream's version as the store holds it now
	// (NoStreamVersion: no events, or not known), HeldEventID the event it
	// holds where SeenEventID was, when another one is there.
	HeldVersion int64
	HeldEventID string
	// SeenPosition and HeldPosition are global-log positions as the store
	// prints them: what a cursor remembered, and the log's end (or the
	// event now where the cursor's was).
	SeenPosition string
	HeldPosition string
	// Detail says what was compared, in words.
	Detail string
	// Context carries what the cache knew that the noticer's observer can
	// use (the command handler: the operation's executions). Optional.
	Context any
}

// RegressionObserver is told of every regression a cache or cursor
// notices. It is called on the path that noticed (a command, a read), so
// it must return promptly; it must be safe for concurrent use, and must
// not call back into the cache that noticed while holding its locks (the
// caches call it with none held).
type RegressionObserver interface {
	ObserveRegression(ctx context.Context, r Regression)
}

// RegressionObserverFunc adapts a function to RegressionObserver.
type RegressionObserverFunc func(ctx context.Context, r Regression)

// ObserveRegression calls f.
func (f RegressionObserverFunc) ObserveRegression(ctx context.Context, r Regression) { f(ctx, r) }
