package simworld

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"opledger/adapters/transport"
	"opledger/domain"
)

// The simulated transport: what the relay publishes, the workers are offered,
// at least once, in the order of an operation unless a fault reorders it. A
// message whose handler died or stalls past the visibility timeout is offered
// again; an acknowledgement can be lost; failing messages are retried a
// bounded number of times and dead-lettered; dead letters wait for an
// operator who resubmits them under new message ids.

type msgState int

const (
	msgReady msgState = iota
	msgInFlight
	msgAcked
	msgDead
)

// Transport bounds.
const (
	// visibilityTimeout: a message in flight that long is offered again.
	visibilityTimeout = 45 * time.Second
	// maxMessageAttempts: failures (not outages) before a dead letter.
	maxMessageAttempts = 5
	// retryBackoff is the first pause before a message is offered again
	// after a Retry; it doubles per delivery up to retryBackoffMax.
	retryBackoff    = time.Second
	retryBackoffMax = 30 * time.Second
	// maxDeliveries bounds the deliveries of one message whatever happens:
	// past it the message is dead-lettered (a bound, not a policy).
	maxDeliveries = 64
)

type message struct {
	seq        int
	out        transport.Outbound
	state      msgState
	notBefore  time.Time
	attempts   int
	deliveries int
	// in flight: who holds it, since when, and the delivery's token (an
	// answer under an older token is stale and ignored).
	holder    *workerProc
	holderInc int
	since     time.Time
	token     int
	// dead letters
	deadReason   domain.Reason
	resubmitted  bool
	resubmission bool // this message is itself a resubmitted copy
}

type simTransport struct {
	w       *World
	msgs    []*message
	signals []transport.Outbound
	seq     int
	tokens  int
	copies  int
	handled int // refund requests acknowledged
}

// Publish implements transport.Publisher (the relay's side).
func (tr *simTransport) Publish(ctx context.Context, out []transport.Outbound) error {
	p := tr.w.serve.p
	if p.dead.Load() {
		return errProcessDead
	}
	if tr.w.storeDown() {
		return errors.New("simulated: transport unreachable during the outage")
	}
	if tr.w.inject(p, FaultPublishFail, "publish %d messages", len(out)) {
		return errors.New("simulated: publish refused")
	}
	for _, o := range out {
		if o.Topic == transport.TopicSecuritySignals {
			tr.signals = append(tr.signals, o)
			tr.w.tracef(p, "relay publishes signal %s", o.MessageID)
			continue
		}
		m := tr.add(o)
		tr.w.tracef(p, "relay publishes %s for %s", o.MessageID, o.Key)
		if tr.w.inject(p, FaultMsgDelay, "hold back %s", o.MessageID) {
			m.notBefore = tr.w.clock.Now().Add(tr.w.rng.between(time.Second, 10*time.Minute))
		}
		if tr.w.inject(p, FaultMsgDuplicate, "%s published twice", o.MessageID) {
			tr.add(o)
		}
	}
	if tr.w.inject(p, FaultPublishLost, "publish of %d messages", len(out)) {
		return errors.New("simulated: publish accepted, answer lost")
	}
	return nil
}

func (tr *simTransport) add(o transport.Outbound) *message {
	tr.seq++
	m := &message{seq: tr.seq, out: o, notBefore: tr.w.clock.Now()}
	tr.msgs = append(tr.msgs, m)
	return m
}

// deliverable returns the messages a worker may take now: per operation the
// first ready one, and nothing of an operation with a message in flight
// (the ordering unit), unless reorder is set.
func (tr *simTransport) deliverable(reorder bool) []*message {
	now := tr.w.clock.Now()
	busy := map[string]bool{}
	for _, m := range tr.msgs {
		if m.state == msgInFlight {
			busy[m.out.Key] = true
		}
	}
	seen := map[string]bool{}
	var out []*message
	for _, m := range tr.msgs {
		if m.state != msgReady {
			continue
		}
		if reorder {
			if !now.Before(m.notBefore) {
				out = append(out, m)
			}
			continue
		}
		if seen[m.out.Key] || busy[m.out.Key] {
			continue
		}
		seen[m.out.Key] = true
		if !now.Before(m.notBefore) {
			out = append(out, m)
		}
	}
	return out
}

// take marks m in flight at wp and returns the delivery's token.
func (tr *simTransport) take(m *message, wp *workerProc) int {
	tr.tokens++
	m.state, m.holder, m.holderInc, m.since, m.token = msgInFlight, wp, wp.p.incarnation, tr.w.clock.Now(), tr.tokens
	m.deliveries++
	return m.token
}

// settle applies a handler's answer to m, unless the delivery is stale (m
// was offered again meanwhile).
func (tr *simTransport) settle(m *message, token int, wp *workerProc, inc int, d transport.Disposition) {
	if m.token != token || m.state != msgInFlight {
		tr.w.tracef(nil, "%s answers %s for %s, too late: it was offered again", wp.id, d.Action, m.out.MessageID)
		return
	}
	m.holder = nil
	now := tr.w.clock.Now()
	switch d.Action {
	case transport.ActionAck:
		if tr.w.inject(wp.p, FaultMsgAckLost, "ack of %s", m.out.MessageID) {
			m.state, m.notBefore = msgReady, now
			return
		}
		m.state = msgAcked
		tr.handled++
		tr.w.tracef(nil, "%s acknowledged", m.out.MessageID)
	case transport.ActionDeadLetter:
		tr.deadLetter(m, d.Reason)
	default:
		if !transport.IsOutage(tr.w.ctx, d) {
			m.attempts++
		}
		switch {
		case m.attempts >= maxMessageAttempts:
			tr.deadLetter(m, domain.ReasonDeliveryAttemptsExhausted)
		case m.deliveries >= maxDeliveries:
			tr.deadLetter(m, domain.ReasonDeliveryAttemptsExhausted)
		default:
			m.state = msgReady
			m.notBefore = now.Add(min(retryBackoff<<min(m.deliveries, 8), retryBackoffMax))
			tr.w.tracef(nil, "%s to be offered again (attempts %d)", m.out.MessageID, m.attempts)
		}
	}
}

func (tr *simTransport) deadLetter(m *message, reason domain.Reason) {
	m.state, m.deadReason = msgDead, reason
	tr.w.tracef(nil, "%s dead-lettered: %s", m.out.MessageID, reason)
}

// redeliverable: messages in flight at a worker that died, stalled or
// restarted, past the visibility timeout.
func (tr *simTransport) redeliverable() []*message {
	now := tr.w.clock.Now()
	var out []*message
	for _, m := range tr.msgs {
		if m.state == msgInFlight && !now.Before(m.since.Add(visibilityTimeout)) {
			out = append(out, m)
		}
	}
	return out
}

// offerAgain puts an in-flight message back (its holder's answer, if it
// comes, is stale).
func (tr *simTransport) offerAgain(m *message, why string) {
	m.state, m.holder, m.notBefore = msgReady, nil, tr.w.clock.Now()
	m.token = 0
	tr.w.tracef(nil, "%s offered again: %s", m.out.MessageID, why)
}

// inFlight lists the messages being handled.
func (tr *simTransport) inFlight() []*message {
	var out []*message
	for _, m := range tr.msgs {
		if m.state == msgInFlight {
			out = append(out, m)
		}
	}
	return out
}

// pending reports whether any message of op's key is ready or in flight.
func (tr *simTransport) pending(op domain.OperationID) bool {
	for _, m := range tr.msgs {
		if m.out.Key == string(op) && (m.state == msgReady || m.state == msgInFlight) {
			return true
		}
	}
	return false
}

// busy reports whether any message is ready or in flight.
func (tr *simTransport) busy() bool {
	for _, m := range tr.msgs {
		if m.state == msgReady || m.state == msgInFlight {
			return true
		}
	}
	return false
}

// resubmit is the operator's `dlq resubmit --all`: every dead letter not yet
// resubmitted (nor itself a resubmitted copy) goes out again under
// transport.ResubmissionMessageID, as the real tool does.
func (tr *simTransport) resubmit() int {
	n := 0
	for _, m := range slices.Clone(tr.msgs) {
		if m.state != msgDead || m.resubmitted || m.resubmission {
			continue
		}
		m.resubmitted = true
		dl := fmt.Sprintf("DL-%d", m.seq)
		id := transport.ResubmissionMessageID(dl)
		o := m.out
		o.MessageID = string(id)
		o.Value = transport.WithMessageID(m.out.Value, id)
		o.Headers = transport.ResubmissionHeaders(m.out.Headers, dl, m.out.MessageID, id)
		c := tr.add(o)
		c.resubmission = true
		tr.w.tracef(nil, "operator resubmits %s (%s) as %s", dl, m.deadReason, id)
		n++
	}
	return n
}

// replay is an operator copying an old, handled message under a new id.
func (tr *simTransport) replay() bool {
	var handled []*message
	for _, m := range tr.msgs {
		if m.state == msgAcked && m.out.Topic == transport.TopicRefundRequests {
			handled = append(handled, m)
		}
	}
	if len(handled) == 0 {
		return false
	}
	m := handled[tr.w.rng.intn(len(handled))]
	tr.copies++
	id := domain.MessageID(fmt.Sprintf("MSG-COPY-%d", tr.copies))
	o := m.out
	o.MessageID, o.Value = string(id), transport.WithMessageID(m.out.Value, id)
	tr.add(o)
	tr.w.tracef(nil, "operator copies %s as %s", m.out.MessageID, id)
	return true
}

// malformed puts hostile input on the topic; unreadable input names no
// capability at all.
func (tr *simTransport) malformed(unreadable bool) {
	tr.copies++
	n := tr.copies
	op := "OP-NOPE"
	if len(tr.w.agents) > 0 {
		op = string(tr.w.agents[tr.w.rng.intn(len(tr.w.agents))].op)
	}
	values := []string{
		`{"message_id":"MSG-BAD-%d","operation_id":"` + op + `\u0000","capability_id":"CAP-1.1"}`,
		`{"message_id":"MSG-BAD-%d","operation_id":"` + op + `","capability_id":"CAP-1.1","operation_id":"OP-2"}`,
		`{"message_id":"MSG-BAD-%d","operation_id":"OP-NOPE-` + op + `","capability_id":"CAP-NOPE.1"}`,
		`{"message_id":"MSG-BAD-%d","operation_id":"` + op + `","capability_id":"CAP-FORGED.9"}`,
		`{"message_id":"MSG-BAD-%d","operation_id":"` + op + `","capability_id":"CAP-1.1","amount":1}`,
	}
	if unreadable {
		values = []string{`not json %d`, `{"message_id":"MSG-BAD-%d","operation_id":"` + op + `"}`}
	}
	v := fmt.Sprintf(values[tr.w.rng.intn(len(values))], n)
	tr.add(transport.Outbound{Topic: transport.TopicRefundRequests, Key: op, MessageID: fmt.Sprintf("MSG-BAD-%d", n), Value: []byte(v)})
	tr.w.tracef(nil, "hostile message on the topic: %q", v)
}
