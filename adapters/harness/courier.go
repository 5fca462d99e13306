package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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

// SourceCourier carries messages through a real transport: the relay
// publishes the capability's message, the transport's Source (the Postgres
// queue or a Kafka consumer group) offers it, and the story's worker of the
// moment handles it. A handler that does not live to acknowledge answers
// Retry, so the transport offers the message again (the redelivery); a
// resubmission is a copy published under a new message id.
type SourceCourier struct {
	Source    transport.Source
	Publisher transport.Publisher
	// Wait bounds how long a step waits for the transport to offer a
	// message (default 60s).
	Wait time.Duration

	jobs chan courierJob
	mu   sync.Mutex
	last transport.Inbound
}

type courierJob struct {
	wk   *worker.Worker
	ack  bool
	done chan courierResult
}

type courierResult struct {
	res worker.Result
	err error
}

// NewSourceCourier starts consuming src until ctx ends.
func NewSourceCourier(ctx context.Context, src transport.Source, pub transport.Publisher) *SourceCourier {
	c := &SourceCourier{Source: src, Publisher: pub, jobs: make(chan courierJob)}
	go func() { _ = src.Consume(ctx, c.handle) }()
	return c
}

// handle is the Source's HandleFunc: it gives the message to the worker the
// current step named.
func (c *SourceCourier) handle(ctx context.Context, in transport.Inbound) transport.Disposition {
	var j courierJob
	select {
	case j = <-c.jobs:
	case <-ctx.Done():
		return transport.Disposition{Action: transport.ActionRetry, Err: ctx.Err()}
	}
	c.mu.Lock()
	if c.last.Value == nil {
		c.last = in
	}
	c.mu.Unlock()
	req, err := transport.DecodeRefundRequest(in.Value)
	if err != nil {
		j.done <- courierResult{err: fmt.Errorf("courier: %w", err)}
		return transport.Disposition{Action: transport.ActionDeadLetter, Reason: transport.ReasonDeliveryMalformed, Detail: err.Error()}
	}
	res, err := j.wk.Handle(ctx, req.Delivery())
	j.done <- courierResult{res: res, err: err}
	if err != nil || !j.ack {
		return transport.Disposition{Action: transport.ActionRetry, Err: err}
	}
	return transport.Disposition{Action: transport.ActionAck}
}

// Carry implements Courier.
func (c *SourceCourier) Carry(ctx context.Context, wk *worker.Worker, r Refund, step Step, ack bool) (worker.Result, error) {
	if step == StepResubmission {
		c.mu.Lock()
		last := c.last
		c.mu.Unlock()
		req, err := transport.DecodeRefundRequest(last.Value)
		if err != nil {
			return worker.Result{}, errors.New("courier: nothing to resubmit yet")
		}
		// The id `opledger dlq resubmit` would give a copy (docs/transport.md):
		// MSG-R- and a UUIDv5, here of the copied message's id.
		id := transport.ResubmissionMessageID(string(req.MessageID))
		if err := c.Publisher.Publish(ctx, []transport.Outbound{{
			Topic: transport.TopicRefundRequests, Key: string(last.Key), MessageID: string(id),
			Value: transport.WithMessageID(last.Value, id), Headers: map[string]string{transport.HeaderMessageID: string(id)},
		}}); err != nil {
			return worker.Result{}, err
		}
	}
	wait := c.Wait
	if wait == 0 {
		wait = 60 * time.Second
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	j := courierJob{wk: wk, ack: ack, done: make(chan courierResult, 1)}
	select {
	case c.jobs <- j:
	case <-timer.C:
		return worker.Result{}, fmt.Errorf("courier: the transport offered no message within %s", wait)
	case <-ctx.Done():
		return worker.Result{}, ctx.Err()
	}
	select {
	case out := <-j.done:
		return out.res, out.err
	case <-ctx.Done():
		return worker.Result{}, ctx.Err()
	}
}
