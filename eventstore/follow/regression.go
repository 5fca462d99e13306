package follow

import (
	"context"
	"fmt"
	"time"

	"opledger/eventstore"
)

// Bounds of the regression check.
const (
	// maxMarks bounds the handled events a follower remembers to rewind
	// to when the log went back (see marks); each is a stream read when
	// the follower searches them, once per regression.
	maxMarks = 256
	// DefaultRegressionCheck is how often, at most, an idle follower checks
	// that the log still holds the last event it handled
	// (Config.RegressionCheck).
	DefaultRegressionCheck = time.Second
)

// defaultMarkSpacing is the least time between two remembered marks but
// the newest: maxMarks of them cover at least a minute of a busy log, more
// than an asynchronous standby falls behind before it is promoted.
const defaultMarkSpacing = 250 * time.Millisecond

// Rewinder is what a Handler whose checkpoint is saved outside the
// follower also offers: Rewind saves to (nil: the start of the log) as its
// checkpoint, though it is behind the saved one, because the log no longer
// holds what the saved one follows. The follower then calls Resume. An
// error is an outage; the follower checks again and rewinds again after
// it. A Handler without it is rewound in memory only (its next Handle
// reads after to).
type Rewinder interface {
	Rewind(ctx context.Context, to eventstore.Position) error
}

// mark is a handled event the follower remembers: where it sat in the log
// and how to read it again.
type mark struct {
	pos     eventstore.Position
	stream  string
	version int64
	id      string
	at      time.Time // real time it was remembered
}

// marks are the last handled events, at most maxMarks, at least
// markSpacing apart but the newest, oldest first. The newest is the
// event the follower's position is at, when it handled one.
type marks struct{ m []mark }

// note remembers e, the last event of a batch handled up to it.
func (ms *marks) note(e *eventstore.RecordedEvent, now time.Time, spacing time.Duration) {
	m := mark{pos: e.Position, stream: e.StreamID, version: e.Version, id: e.ID, at: now}
	n := len(ms.m)
	switch {
	case n > 0 && ms.m[n-1].pos.Compare(m.pos) >= 0:
		return
	case n > 1 && now.Sub(ms.m[n-2].at) < spacing:
		ms.m[n-1] = m // keep the spacing; the newest is always the last one handled
	default:
		if n == maxMarks {
			ms.m = append(ms.m[:0], ms.m[1:]...)
		}
		ms.m = append(ms.m, m)
	}
}

// newest returns the newest mark, if any.
func (ms *marks) newest() (mark, bool) {
	if n := len(ms.m); n > 0 {
		return ms.m[n-1], true
	}
	return mark{}, false
}

// dropAfter forgets the marks after pos (nil: all).
func (ms *marks) dropAfter(pos eventstore.Position) {
	for len(ms.m) > 0 && (pos == nil || ms.m[len(ms.m)-1].pos.Compare(pos) > 0) {
		ms.m = ms.m[:len(ms.m)-1]
	}
}

// held reports whether the store still holds m's event where it was read.
func held(ctx context.Context, store eventstore.Store, m mark) (bool, string, error) {
	events, err := store.ReadStream(ctx, m.stream, m.version, 1)
	if err != nil {
		return false, "", err
	}
	if len(events) == 1 && events[0].Version == m.version {
		return events[0].ID == m.id, events[0].ID, nil
	}
	return false, "", nil
}

// checkRegression checks, before a read, at most every
// RegressionCheck and first thing after an outage or on taking the
// leadership, that the log still holds the last event the follower
// handled (by its stream and version), and, when its position is past
// that event (resumed from a checkpoint another leader saved, or none
// handled yet), that the log does not end before the position (with a
// Header store). A log that went back (a failover to a standby that had
// not received the last commits) is reported to the observer, and the
// follower rewinds to the newest remembered event the log still holds, or
// to the start of the log when it holds none of them, unless its position
// is before that already (a checkpoint saved in the same database went
// back with the log): events
// handled again are the role's at-least-once (a relay publishes them
// again under their message ids, the projector's re-applied events are
// no-ops), while events written after the promotion may sit before the
// old position and would otherwise never be read. A check that cannot
// read says nothing; the next one tries again.
func (l *leading[T]) checkRegression(ctx context.Context) error {
	cfg := &l.f.cfg
	now := time.Now()
	if l.after == nil || now.Sub(l.lastRegressionCheck) < cfg.RegressionCheck {
		return nil
	}
	l.lastRegressionCheck = now
	r, found, err := l.regressed(ctx)
	if err != nil || !found {
		if err != nil {
			cfg.Logger.DebugContext(ctx, "follow: regression check could not read the log", "err", err)
		}
		return nil
	}
	var oldest eventstore.Position
	if len(l.f.marks.m) > 0 {
		oldest = l.f.marks.m[0].pos
	}
	to := l.rewindTarget(ctx)
	l.f.marks.dropAfter(to)
	if to != nil && to.Compare(l.after) >= 0 || to == nil && oldest != nil && oldest.Compare(l.after) > 0 {
		// The position is before every handled event the log lost: it
		// went back with the log (a checkpoint saved in the same
		// database), and what was written since follows it.
		to = l.after
	}
	r.Cache, r.SeenVersion, r.HeldVersion = cfg.RegressionCache, eventstore.NoStreamVersion, eventstore.NoStreamVersion
	rewound := "the start of the log"
	if to != nil {
		rewound = to.String()
	}
	r.Detail += "; the follower reads again after " + rewound
	cfg.Logger.ErrorContext(ctx, "follow: LOG REGRESSION: the log no longer holds what this follower's position follows; reading again from the newest event it still holds",
		"seen_position", r.SeenPosition, "seen_event_id", r.SeenEventID, "held_position", r.HeldPosition, "rewound_to", rewound)
	if cfg.Regressions != nil {
		cfg.Regressions.ObserveRegression(ctx, r)
	}
	if to != nil && to.Compare(l.after) == 0 {
		return nil
	}
	if rw, ok := cfg.Handler.(Rewinder); ok {
		if err := rw.Rewind(ctx, to); err != nil {
			l.resumed = false
			return l.outage(ctx, StageCheckpoint, fmt.Errorf("rewind after a log regression: %w", err))
		}
		l.resumed = false
		return nil
	}
	l.after = to
	return nil
}

// regressed compares the follower's position with the log.
func (l *leading[T]) regressed(ctx context.Context) (eventstore.Regression, bool, error) {
	store := l.f.cfg.Store
	if m, ok := l.f.marks.newest(); ok {
		ok, now, err := held(ctx, store, m)
		switch {
		case err != nil:
			return eventstore.Regression{}, false, err
		case !ok:
			r := eventstore.Regression{SeenEventID: m.id, SeenPosition: m.pos.String(), HeldEventID: now,
				Detail: fmt.Sprintf("the log no longer holds event %s (%s version %d) at %s, which this follower handled", m.id, m.stream, m.version, m.pos)}
			if h, ok := store.(eventstore.Header); ok {
				if head, err := h.Head(ctx); err == nil && head != nil {
					r.HeldPosition = head.String()
				}
			}
			return r, true, nil
		case m.pos.Compare(l.after) >= 0:
			return eventstore.Regression{}, false, nil
		}
	}
	h, ok := store.(eventstore.Header)
	if !ok {
		return eventstore.Regression{}, false, nil
	}
	head, err := h.Head(ctx)
	if err != nil || (head != nil && head.Compare(l.after) >= 0) {
		return eventstore.Regression{}, false, err
	}
	r := eventstore.Regression{SeenPosition: l.after.String(),
		Detail: fmt.Sprintf("the log ends before this follower's checkpoint %s", l.after)}
	if head != nil {
		r.HeldPosition = head.String()
		r.Detail = fmt.Sprintf("the log ends at %s, before this follower's checkpoint %s", head, l.after)
	}
	return r, true, nil
}

// rewindTarget is the newest remembered event the log still holds (nil:
// none, the start of the log). A mark whose read fails counts as not held:
// reading too much again is safe, reading too little is not.
func (l *leading[T]) rewindTarget(ctx context.Context) eventstore.Position {
	for i := len(l.f.marks.m) - 1; i >= 0; i-- {
		m := l.f.marks.m[i]
		if ok, _, err := held(ctx, l.f.cfg.Store, m); err == nil && ok {
			return m.pos
		}
	}
	return nil
}
