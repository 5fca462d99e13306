package simworld

import (
	"context"
	"errors"
	"fmt"

	"opledger/domain"
	"opledger/eventstore"
)

// view is one process's connection to the event store, through which the
// world injects store faults: a read that fails, an append that fails
// unwritten, an append whose commit succeeds but whose answer is lost, and
// outages during which every call fails. A view may also hand the baton back
// before a call (preemption), so that another thread runs between one
// command's load and its append: the optimistic-concurrency races.
type view struct {
	w    *World
	p    *process
	name string
	// current is the thread making the call, for preemption (nil: the view
	// is the scheduler's own, it never parks).
	current *thread
	// poll makes ReadAll park until the scheduler lets it run: the relay's
	// poll. lastPoll is the world's append count the relay has caught up
	// with: read to the end and saved its checkpoint (or read nothing).
	poll     bool
	lastPoll int64
	// heads is the process's store connection's head cache (nil: none).
	heads   *headCache
	failed  bool  // the last poll failed
	unsaved bool  // the last poll read events whose checkpoint is not saved yet
	readAt  int64 // the append count at that poll
	// evidenceOnOpStream: a planted defect (Options.hostileEvidenceOnOpStream)
	evidenceOnOpStream bool
}

var _ eventstore.Store = (*view)(nil)

// unavailable is the error of a failed call.
func (v *view) unavailable(op string, why string) error {
	return eventstore.Unavailable(op, fmt.Errorf("simulated: %s", why))
}

// enter runs before every call: it fails the call of a dead process or
// during an outage, and may preempt the caller.
func (v *view) enter(ctx context.Context, op string) error {
	if v.p.dead.Load() {
		return v.unavailable(op, "process died")
	}
	if t := v.current; t != nil && v.w.preempt() {
		if _, err := v.w.s.gate(ctx, t, &park{label: "store " + op, openable: true}); err != nil {
			return v.unavailable(op, err.Error())
		}
	}
	if v.w.storeDown() {
		v.w.tracef(v.p, "%s: %s fails: store outage", v.name, op)
		return v.unavailable(op, "store outage")
	}
	return nil
}

func (v *view) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if op, inEvidence, ok := domain.OperationOfStream(stream); v.evidenceOnOpStream && ok && inEvidence {
		stream, expected = op.StreamName(), eventstore.Any()
	}
	op := "append " + stream
	epoch, cuts := v.w.failovers, len(v.w.cuts)
	if err := v.enter(ctx, op); err != nil {
		return eventstore.AppendResult{}, err
	}
	if v.w.failovers != epoch {
		// In flight when the primary was lost: committed (and replicated)
		// or not, the answer lost with the connection; an asynchronous
		// standby lost it either way. The statement in flight carried the
		// head the connection knew, so it commits only where that holds.
		if v.w.rng.chance(0.5) && len(v.w.cuts) == cuts && (v.heads == nil || v.heads.admits(stream, expected)) {
			if _, err := v.w.inner.Append(ctx, stream, expected, events); err == nil {
				v.w.appends++
				v.w.committed()
			}
		}
		v.w.tracef(v.p, "%s: %s reset by the failover", v.name, op)
		return eventstore.AppendResult{}, v.unavailable(op, "connection reset by the failover")
	}
	if v.w.inject(v.p, FaultStoreWriteFail, "%s %s (%s)", v.name, op, events[0].Type) {
		return eventstore.AppendResult{}, v.unavailable(op, "write failed")
	}
	if v.heads != nil && !v.heads.beforeAppend(ctx, stream, expected) {
		held := eventstore.NoStreamVersion
		if page, err := v.w.inner.ReadStream(ctx, stream, 0, 100_000); err == nil && len(page) > 0 {
			held = page[len(page)-1].Version
		}
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: held}
	}
	lost := v.w.inject(v.p, FaultStoreCommitLost, "%s %s (%s)", v.name, op, events[0].Type)
	res, err := v.w.inner.Append(ctx, stream, expected, events)
	if err != nil && v.w.flood != nil && errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		v.w.holderConflict(v, stream, expected)
	}
	if err == nil {
		v.w.appends++
		v.w.committed()
		if lost {
			return eventstore.AppendResult{}, v.unavailable(op, "committed, answer lost")
		}
		if v.heads != nil {
			v.heads.appended(stream, res, events)
		}
	}
	return res, err
}

func (v *view) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	op := "read " + stream
	epoch := v.w.failovers
	if err := v.enter(ctx, op); err != nil {
		return nil, err
	}
	if v.w.failovers != epoch {
		return nil, v.unavailable(op, "connection reset by the failover")
	}
	if v.w.inject(v.p, FaultStoreReadFail, "%s %s", v.name, op) {
		return nil, v.unavailable(op, "read failed")
	}
	page, err := v.w.inner.ReadStream(ctx, stream, from, limit)
	if err == nil && v.heads != nil {
		v.heads.read(ctx, stream, from, limit, page)
	}
	return page, err
}

func (v *view) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	if v.p.dead.Load() {
		return nil, v.unavailable("read all", "process died")
	}
	if v.poll {
		if _, err := v.w.s.gate(ctx, v.current, &park{label: "poll", openable: true, ready: v.pollReady}); err != nil {
			return nil, v.unavailable("read all", err.Error())
		}
	}
	saved := v.current
	if v.poll {
		v.current = nil // the relay's poll is its one gate: no preemption inside
	}
	err := v.enter(ctx, "read all")
	v.current = saved
	if err == nil && v.w.inject(v.p, FaultStoreReadFail, "%s read all", v.name) {
		err = v.unavailable("read all", "read failed")
	}
	if err != nil {
		v.failed = true
		return nil, err
	}
	batch, err := v.w.inner.ReadAll(ctx, after, limit)
	v.failed = err != nil
	switch {
	case err != nil || !v.poll:
	case len(batch) == 0:
		v.lastPoll, v.unsaved = v.w.appends, false
	case len(batch) < limit:
		v.unsaved, v.readAt = true, v.w.appends
	default:
		v.unsaved, v.readAt = true, -1 // more to read
	}
	return batch, err
}

// saved: the relay saved its checkpoint after its last poll.
func (v *view) saved() {
	if v.unsaved && v.readAt >= 0 {
		v.lastPoll = v.readAt
	}
	v.unsaved = false
}

// pollReady: the relay has something to read (the log grew since it last
// caught up), or a batch to read again (a publish or a checkpoint failed),
// or a failed read to retry.
func (v *view) pollReady() bool { return v.failed || v.unsaved || v.lastPoll != v.w.appends }

func (v *view) ParsePosition(s string) (eventstore.Position, error) {
	return v.w.inner.ParsePosition(s)
}

// Close does nothing: the world closes the store it wraps.
func (v *view) Close() {}
