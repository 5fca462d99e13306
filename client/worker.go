package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Worker handles messages of the team's queue: claim, execute once under a
// held lease, record (docs/api.md, "A worker in any language").
type Worker struct {
	Client   *Client
	Executor Executor
	// CallTimeout bounds one executor call, resends included (default 30s,
	// and never past the lease's deadline). It must be shorter than the
	// client's LeaseDuration.
	CallTimeout time.Duration
}

// Handled is what handling one message did.
type Handled struct {
	// Claim is the ledger's answer to the presentation.
	Claim ClaimAnswer
	// Executed: the executor was called (Claimed, with lease time left).
	Executed bool
	// Result is the executor's classified result (Claimed only).
	Result Result
	// LeaseLost is why the lease was lost during the call, nil if held.
	LeaseLost error
	// Recorded says how the result entered the ledger; RecordErr why it did
	// not (NotRecorded: the lease lapses to Unknown and the reconciler asks
	// the provider).
	Recorded  Recorded
	RecordErr error
}

// ErrMalformedMessage wraps a claim refused as malformed (400: a message id
// that does not parse, say): dead-letter the message.
var ErrMalformedMessage = errors.New("malformed message")

// Handle claims m's capability and, only when Claimed, runs the executor
// once under the lease (renewed in the background; its context cancelled
// the moment the lease is lost) and records the result under the lease's
// epoch, or as late evidence once the lease is lost.
//
// It returns an error only when the claim was not answered as recorded
// (serve unavailable, no answer): nothing was executed, and the message must
// not be acknowledged. Every other outcome, every refusal included, was
// recorded by the ledger: acknowledge the message.
func (w *Worker) Handle(ctx context.Context, m Message) (Handled, error) {
	c := w.Client
	callTimeout := cmp.Or(w.CallTimeout, 30*time.Second)
	if callTimeout >= c.cfg.LeaseDuration {
		return Handled{}, fmt.Errorf("worker: CallTimeout %s must be shorter than the lease %s, so that a slow but live call is not swept", callTimeout, c.cfg.LeaseDuration)
	}
	answer, err := c.Claim(ctx, m)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.StatusCode == 400 {
			return Handled{}, fmt.Errorf("%w: %w", ErrMalformedMessage, err)
		}
		return Handled{}, err
	}
	h := Handled{Claim: answer}
	if answer.Status != Claimed {
		// Never execute; never infer the first delivery's fate from a duplicate.
		c.log.InfoContext(ctx, "not executing", "message_id", m.MessageID, "status", answer.Status, "reason", answer.Reason,
			"replay_suspected", answer.ReplaySuspected)
		return h, nil
	}
	x := answer.Execution
	if left := x.Deadline().Sub(c.cfg.Now()); left <= 0 {
		h.Result = Result{Outcome: NotApplied, Detail: "not sent: the lease expired before the request could be sent"}
	} else {
		lease := c.KeepLease(ctx, x)
		callCtx, cancel := context.WithTimeout(lease.Context(), min(callTimeout, left))
		h.Result = w.Executor.Execute(callCtx, x)
		cancel()
		h.LeaseLost = lease.Stop()
		h.Executed = true
	}
	// What the executor said must reach the ledger even if ctx ends now (a
	// shutdown): record on a detached context, bounded by one lease.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LeaseDuration)
	defer cancel()
	h.Recorded, h.RecordErr = c.Record(rctx, x, h.Result, h.LeaseLost)
	level := c.log.InfoContext
	if h.RecordErr != nil {
		level = c.log.WarnContext
	}
	level(ctx, "handled", "message_id", m.MessageID, "execution", x, "outcome", h.Result.Outcome,
		"provider_reference", h.Result.ProviderReference, "recorded", h.Recorded, "lease_lost", h.LeaseLost, "err", h.RecordErr)
	return h, nil
}

// Run handles the messages of next one at a time until ctx ends or next
// returns an error (returned, unless it is ctx's), and reports each to
// settle: the message, what handling did, and the error that means "do not
// acknowledge" (nil: acknowledge). next blocks for the next message.
func (w *Worker) Run(ctx context.Context, next func(context.Context) (Message, error), settle func(Message, Handled, error)) error {
	for ctx.Err() == nil { // one message per turn; ends with ctx or next
		m, err := next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		h, err := w.Handle(ctx, m)
		settle(m, h, err)
	}
	return nil
}
