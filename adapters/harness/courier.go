package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/worker"
)

// Step is which delivery of the story a courier carries.
type Step int

const (
	// StepFirst is the message the relay published for the capability.
	StepFirst Step = iota
	// StepRedelivery is the same message offered again after its first
	// handler vanished without acknowledging it.
	StepRedelivery
	// StepResubmission is an operator's copy of the message under a new id.
	StepResubmission
)

// Courier carries the story's messages to workers.
type Courier interface {
	// Carry hands refund r's message for step to wk and returns what wk
	// did. ack says whether the handler lived to acknowledge it.
	Carry(ctx context.Context, wk *worker.Worker, r Refund, step Step, ack bool) (worker.Result, error)
}

// DirectCourier calls workers in process with the seed's message ids.
type DirectCourier struct{}

// Carry implements Courier.
func (DirectCourier) Carry(ctx context.Context, wk *worker.Worker, r Refund, step Step, _ bool) (worker.Result, error) {
	msg := domain.MessageID("MSG-55A")
	if step == StepResubmission {
		msg = "MSG-9F1"
	}
	return wk.Handle(ctx, r.Delivery(msg))
}

// QueueCourier carries messages through the Postgres-only transport: the
// relay publishes the capability's message into the queue, workers claim it
// from there, an unacknowledged claim comes back after the queue's
// visibility timeout, and a resubmission is a copy published under a new id.
type QueueCourier struct {
	Queue *pgqueue.Queue
	// Wait bounds how long a claim is retried while the queue is empty
	// (default 30s): the relay, or the visibility timeout, must come first.
	Wait time.Duration

	last pgqueue.Claimed
}

// Carry implements Courier.
func (c *QueueCourier) Carry(ctx context.Context, wk *worker.Worker, r Refund, step Step, ack bool) (worker.Result, error) {
	if step == StepResubmission {
		if c.last.MessageID == "" {
			return worker.Result{}, errors.New("courier: nothing to resubmit yet")
		}
		id := domain.MessageID("MSG-RESUBMIT-" + c.last.MessageID)
		if err := c.Queue.Publish(ctx, []transport.Outbound{{
			Topic: c.last.Topic, Key: c.last.Key, MessageID: string(id),
			Value: transport.WithMessageID(c.last.Value, id), Headers: map[string]string{transport.HeaderMessageID: string(id)},
		}}); err != nil {
			return worker.Result{}, err
		}
	}
	claimed, err := c.claimOne(ctx)
	if err != nil {
		return worker.Result{}, err
	}
	if step == StepFirst {
		c.last = claimed
	}
	req, err := transport.DecodeRefundRequest(claimed.Value)
	if err != nil {
		return worker.Result{}, fmt.Errorf("courier: %w", err)
	}
	res, err := wk.Handle(ctx, req.Delivery())
	if err != nil || !ack {
		return res, err // no acknowledgement: the message comes back
	}
	return res, c.Queue.Settle(ctx, claimed, transport.Disposition{Action: transport.ActionAck})
}

func (c *QueueCourier) claimOne(ctx context.Context) (pgqueue.Claimed, error) {
	wait := c.Wait
	if wait == 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		got, err := c.Queue.Claim(ctx, "story", 1)
		if err != nil {
			return pgqueue.Claimed{}, err
		}
		if len(got) == 1 && !got[0].Exhausted {
			return got[0], nil
		}
		select {
		case <-ctx.Done():
			return pgqueue.Claimed{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return pgqueue.Claimed{}, fmt.Errorf("courier: no message in the queue within %s", wait)
}
