package simworld

import (
	"context"
	"fmt"
	"time"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// Worker settings (the defaults of `opledger worker`).
const (
	leaseDuration = domain.DefaultLeaseDuration // renewed every third: 20s
	recordBackoff = 100 * time.Millisecond
	recordMax     = time.Second
)

// workerProc is one `opledger worker` process: the real worker role and
// dispatcher, on its own connection to the store and to the provider,
// handling one delivery at a time.
type workerProc struct {
	w       *World
	id      string
	p       *process
	view    *view
	ledger  *ledger.Handler
	notices *noticing // the process's regression recorder
	disp    *transport.Dispatcher
	tasks   int

	// the delivery in hand
	task    *thread
	msg     *message
	token   int
	exec    domain.ExecutionID // the execution the delivery claimed
	expires time.Time          // and its lease's expiry, as claimed
	// what the claim named: a hostile flood presents them again
	op         domain.OperationID
	epoch      int64
	capability domain.CapabilityID
	claimed    domain.MessageID
	// the lease renewal beside the provider call: fresh until the renewal
	// goroutine the worker starts has parked at its first timer.
	renew      *thread
	renewFresh bool
	renewReady chan struct{}
	result     transport.Disposition
}

// every is the worker's renewal period: a third of the lease. The worker's
// After is told the renewal's timer from a recording back-off by it.
const every = leaseDuration / 3

func newWorkerProc(w *World, id string, incarnation int) *workerProc {
	wp := &workerProc{w: w, id: id, p: newProcess(w.ctx, id, incarnation)}
	wp.notices = newNoticing(w, wp.p)
	wp.view = &view{w: w, p: wp.p, name: id, heads: newHeadCache(w, wp.notices)}
	wp.ledger = w.newHandler(wp.view, wp.notices, domain.CacheWorker)
	n := &network{w: w, p: wp.p, name: id, current: func() *thread { return wp.task }, sendTimeout: sendTimeout,
		sender: func(string, string) domain.ExecutionID { return wp.exec }}
	var wk *worker.Worker
	shim := &callShim{w: w, p: wp.p, name: id, client: newClient(w, n), net: n,
		timeout: func() time.Duration { return wk.CallTimeout(wp.expires) }, // what the worker set, on the world's clock
		current: func() *thread { return wp.task }, begin: wp.callBegins, end: wp.callEnds}
	var err error
	wk, err = worker.New(worker.Config{
		ID: id, Ledger: (*workerLedger)(wp), Provider: shim, Clock: w.clock, Logger: w.log,
		LeaseDuration: leaseDuration, ProviderTimeout: workerCallTimeout,
		RecordBackoff: recordBackoff, RecordBackoffMax: recordMax, After: wp.after,
	})
	if err != nil {
		panic(err)
	}
	wp.disp, err = transport.NewDispatcher(transport.DispatcherConfig{Worker: wk, Evidence: (*workerLedger)(wp), WorkerID: id, Clock: w.clock, Logger: w.log})
	if err != nil {
		panic(err)
	}
	return wp
}

// after is the worker's injected After: the lease renewal's timer (every
// third of the lease) or a recording back-off.
func (wp *workerProc) after(d time.Duration) <-chan time.Time {
	s := wp.w.s
	if d != every {
		return s.after(wp.task, "record back-off", d, true)
	}
	if wp.p.dead.Load() {
		return nil // a dead worker's renewal ends when its call stops it
	}
	if wp.renewFresh {
		// The renewal goroutine's first timer: it runs beside the call,
		// which waits for this (callBegins) before it goes on.
		wp.renewFresh = false
		wp.renew = s.adopt(wp.p, wp.task.name+"/renew")
		wp.renew.renewal = true
		ch := s.after(wp.renew, "lease renewal", d, false)
		wp.renewReady <- struct{}{}
		return ch
	}
	return s.after(wp.renew, "lease renewal", d, true)
}

// callBegins waits until the lease renewal the worker started has parked.
func (wp *workerProc) callBegins() {
	select {
	case <-wp.renewReady:
	case <-wp.p.ctx.Done():
	}
}

// callEnds: after the call the worker stops its renewal.
func (wp *workerProc) callEnds() {
	if wp.p.dead.Load() {
		return
	}
	if wp.renew != nil {
		wp.renew.done = true
		wp.renew = nil
	}
}

// deliver hands m to the worker on a new thread.
func (wp *workerProc) deliver(m *message, token int) {
	wp.tasks++
	wp.msg, wp.token, wp.result, wp.exec = m, token, transport.Disposition{}, ""
	in := transport.Inbound{
		Key: []byte(m.out.Key), Value: m.out.Value, Headers: m.out.Headers,
		Origin: transport.Origin{Transport: "sim", Topic: m.out.Topic, Offset: int64(m.seq), Attempt: m.deliveries},
	}
	name := fmt.Sprintf("%s.t%d", wp.id, wp.tasks)
	wp.w.tracef(nil, "%s takes %s (delivery %d)", name, m.out.MessageID, m.deliveries)
	inc := wp.p.incarnation
	wp.w.s.spawn(wp.p, name, func(t *thread) {
		wp.task, wp.view.current = t, t
		t.onDone = func() {
			wp.task, wp.msg = nil, nil
			wp.w.transport.settle(m, token, wp, inc, wp.result)
		}
	}, func(ctx context.Context) {
		wp.notices.flush(ctx)
		wp.result = wp.disp.Handle(ctx, in)
	})
}

// workerLedger is the worker's Ledger (and the dispatcher's Evidence): the
// process's command handler, telling the view which thread calls and the
// world what the ledger answered.
type workerLedger workerProc

func (l *workerLedger) Claim(ctx context.Context, op domain.OperationID, cmd domain.Claim) (ledger.ClaimOutcome, error) {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return ledger.ClaimOutcome{}, errProcessDead
	}
	wp.view.current = wp.task
	out, err := wp.ledger.Claim(ctx, op, cmd)
	wp.w.observeClaim(wp.p, wp.task, op, cmd, out, err)
	if err == nil && out.Status == domain.StatusClaimed {
		wp.renewFresh, wp.renewReady = true, make(chan struct{}, 1)
		wp.exec, wp.expires = out.ExecutionID, out.Claimed.LeaseExpiresAt
		wp.op, wp.epoch, wp.capability, wp.claimed = op, out.Claimed.LeaseEpoch, cmd.CapabilityID, cmd.MessageID
	}
	return out, err
}

func (l *workerLedger) RenewLease(ctx context.Context, op domain.OperationID, cmd domain.RenewLease, by ledger.Cause) (domain.LeaseRenewed, error) {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return domain.LeaseRenewed{}, errProcessDead
	}
	if wp.renew != nil {
		wp.view.current = wp.renew
	} else {
		wp.view.current = wp.task
	}
	on, cuts := wp.w.floodOn(wp, cmd.ExecutionID), len(wp.w.cuts)
	ev, err := wp.ledger.RenewLease(ctx, op, cmd, by)
	wp.w.observeWrite(wp.p, op, cmd.ExecutionID, domain.CommandRenewLease, err)
	wp.w.holderWrote(wp, op, cmd.ExecutionID, domain.CommandRenewLease, on, cuts, err, func(st *domain.Operation, now time.Time) ([]domain.Event, error) {
		return st.RenewLease(cmd, now)
	})
	return ev, err
}

func (l *workerLedger) RecordOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordOutcome, by ledger.Cause) error {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return errProcessDead
	}
	wp.view.current = wp.task
	on, cuts := wp.w.floodOn(wp, cmd.ExecutionID), len(wp.w.cuts)
	err := wp.ledger.RecordOutcome(ctx, op, cmd, by)
	wp.w.tracef(wp.p, "%s records %s for %s epoch %d → %s", wp.task, cmd.Outcome, cmd.ExecutionID, cmd.LeaseEpoch, errText(err))
	wp.w.observeWrite(wp.p, op, cmd.ExecutionID, domain.CommandRecordOutcome, err)
	wp.w.holderWrote(wp, op, cmd.ExecutionID, domain.CommandRecordOutcome, on, cuts, err, func(st *domain.Operation, now time.Time) ([]domain.Event, error) {
		return st.RecordOutcome(cmd, now)
	})
	return err
}

func (l *workerLedger) RecordLateOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordLateOutcome, by ledger.Cause) error {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return errProcessDead
	}
	wp.view.current = wp.task
	err := wp.ledger.RecordLateOutcome(ctx, op, cmd, by)
	wp.w.tracef(wp.p, "%s records late %s for %s epoch %d → %s", wp.task, cmd.Outcome, cmd.ExecutionID, cmd.LeaseEpoch, errText(err))
	wp.w.observeWrite(wp.p, op, cmd.ExecutionID, domain.CommandRecordLateOutcome, err)
	return err
}

func (l *workerLedger) EscalateLostEffect(ctx context.Context, op domain.OperationID, cmd domain.EscalateLostEffect, by ledger.Cause) (bool, error) {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return false, errProcessDead
	}
	wp.view.current = wp.task
	escalated, err := wp.ledger.EscalateLostEffect(ctx, op, cmd, by)
	wp.w.tracef(wp.p, "%s escalates lost effect %s of %s (%s) → %v %s", wp.task, cmd.ProviderReference, cmd.LostExecutionID, cmd.Outcome, escalated, errText(err))
	return escalated, err
}

func (l *workerLedger) RecordUnattributed(ctx context.Context, ev domain.PresentationRejected, by ledger.Cause) error {
	wp := (*workerProc)(l)
	if wp.p.dead.Load() {
		return errProcessDead
	}
	wp.view.current = wp.task
	err := wp.ledger.RecordUnattributed(ctx, ev, by)
	wp.w.tracef(wp.p, "%s records unattributed evidence for %s (%s) → %s", wp.task, ev.MessageID, ev.Reason, errText(err))
	return err
}

// errText is an error as the trace shows it: its first words, stable.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	var r *domain.Refusal
	if asRefusal(err, &r) {
		return string(r.Reason)
	}
	return "error: " + classOf(err)
}
