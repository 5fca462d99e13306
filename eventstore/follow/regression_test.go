package follow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/follow"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// rewinder is a recorder that also saves a rewound checkpoint
// (follow.Rewinder), remembering each rewind.
type rewinder struct {
	recorder
	rewinds []eventstore.Position
	leave   bool // the next Idle says the leadership is lost
}

func (r *rewinder) Idle(ctx context.Context) error {
	r.mu.Lock()
	leave := r.leave
	r.leave = false
	r.mu.Unlock()
	if leave {
		return fmt.Errorf("%w: the primary died", follow.ErrLeadershipLost)
	}
	return r.recorder.Idle(ctx)
}

func (r *rewinder) Rewind(_ context.Context, to eventstore.Position) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rewinds = append(r.rewinds, to)
	r.saved = to
	r.got = append(r.got, "rewind")
	return nil
}

func (r *rewinder) rewound() []eventstore.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]eventstore.Position(nil), r.rewinds...)
}

// observed keeps the regressions a follower reported.
type observed struct {
	mu   sync.Mutex
	regs []eventstore.Regression
}

func (o *observed) ObserveRegression(_ context.Context, r eventstore.Regression) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.regs = append(o.regs, r)
}

func (o *observed) all() []eventstore.Regression {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]eventstore.Regression(nil), o.regs...)
}

// pgLog is a migrated PostgreSQL store with n events of stream "a", each in
// its own transaction, and their ids.
func pgLog(t *testing.T, n int) (*postgres.Store, string, string, []string) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("00000000-0000-0000-0000-%012d", i+1)
		_, err := store.Append(t.Context(), "a", eventstore.Any(), []eventstore.EventData{{ID: id, Type: "Tested", Data: []byte(`{}`)}})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return store, url, schema, ids
}

// readLog reads the log once it shows n events (a reader waits below the
// oldest transaction still open on the server: another test's).
func readLog(t *testing.T, store eventstore.Store, n int) []eventstore.RecordedEvent {
	t.Helper()
	var events []eventstore.RecordedEvent
	waitUntil(t, "the log readable", func() bool {
		var err error
		events, err = store.ReadAll(t.Context(), nil, n)
		require.NoError(t, err)
		return len(events) == n
	})
	return events
}

func appendB(t *testing.T, store eventstore.Store) string {
	t.Helper()
	id := "00000000-0000-0000-0000-0000000000b1"
	_, err := store.Append(t.Context(), "b", eventstore.NoStream(), []eventstore.EventData{{ID: id, Type: "Tested", Data: []byte(`{}`)}})
	require.NoError(t, err)
	return id
}

// A follower whose log went back under its position (the last events it
// handled are gone, as after a failover to an asynchronous standby) tells
// its observer once, naming the event it had handled, rewinds its handler
// to the newest event it handled that the log still holds, and reads what
// was written since — never the lost events again, never skipping the new
// one.
func TestFollowerRewindsWhenTheLogWentBack(t *testing.T) {
	t.Parallel()
	store, url, schema, ids := pgLog(t, 5)
	h := &rewinder{}
	obs := &observed{}
	f := newFollower(t, store, h, func(c *follow.Config[int]) {
		c.BatchSize = 1
		follow.SetMarkSpacing(c, time.Nanosecond)
		c.Regressions, c.RegressionCache, c.RegressionCheck = obs, "relay_checkpoint", time.Nanosecond
	})
	stop := run(t, f)
	waitUntil(t, "the five events handled", func() bool { got, _, _ := h.snapshot(); return len(got) == 5 })

	pgtest.Shorten(t, url, schema, "a", 2) // the last two events are lost
	b := appendB(t, store)
	waitUntil(t, "the new event handled", func() bool { got, _, _ := h.snapshot(); return got[len(got)-1] == b })
	stop()

	regs := obs.all()
	require.Len(t, regs, 1, "one regression reported")
	require.Equal(t, "relay_checkpoint", regs[0].Cache)
	require.Equal(t, ids[4], regs[0].SeenEventID, "names the last event it handled")
	require.Equal(t, eventstore.NoStreamVersion, regs[0].SeenVersion)

	kept, err := store.ReadStream(t.Context(), "a", 2, 1)
	require.NoError(t, err)
	require.Equal(t, []eventstore.Position{kept[0].Position}, h.rewound(), "rewound to the newest handled event still held")
	got, _, _ := h.snapshot()
	require.Equal(t, append(append([]string(nil), ids...), "rewind", b), got, "the new event read once, the lost ones not again")
}

// A follower that resumes from a saved checkpoint past the log's end (the
// process restarted after the failover, remembering nothing but its
// checkpoint) notices it and reads the log again from the start.
func TestFollowerResumingPastTheLogsEndReadsItAgain(t *testing.T) {
	t.Parallel()
	store, url, schema, ids := pgLog(t, 4)
	events := readLog(t, store, len(ids))
	h := &rewinder{}
	h.saved = events[3].Position // saved before the failover
	pgtest.Shorten(t, url, schema, "a", 1)

	obs := &observed{}
	f := newFollower(t, store, h, func(c *follow.Config[int]) {
		c.Regressions, c.RegressionCache, c.RegressionCheck = obs, "projector_checkpoint", time.Nanosecond
	})
	run(t, f)
	waitUntil(t, "the log read again", func() bool { got, _, _ := h.snapshot(); return len(got) == 3 })
	got, _, _ := h.snapshot()
	require.Equal(t, []string{"rewind", ids[0], ids[1]}, got)
	require.Equal(t, []eventstore.Position{nil}, h.rewound(), "no handled event to rewind to: the start of the log")
	regs := obs.all()
	require.Len(t, regs, 1)
	require.Equal(t, "projector_checkpoint", regs[0].Cache)
	require.Equal(t, events[3].Position.String(), regs[0].SeenPosition)
	require.Equal(t, events[1].Position.String(), regs[0].HeldPosition, "the log's end as it is held")
}

// A follower whose saved checkpoint went back with the log (saved in the
// same database, as the relay's and the projector's are), and whose
// leadership the failover took, still notices the events it handled are
// gone, and reads on from the checkpoint: nothing is read twice, nothing
// written since is skipped.
func TestFollowerWhoseCheckpointWentBackWithTheLog(t *testing.T) {
	t.Parallel()
	store, url, schema, ids := pgLog(t, 5)
	events := readLog(t, store, len(ids))
	h := &rewinder{}
	obs := &observed{}
	f := newFollower(t, store, h, func(c *follow.Config[int]) {
		c.BatchSize = 1
		follow.SetMarkSpacing(c, time.Nanosecond)
		c.Regressions, c.RegressionCache, c.RegressionCheck = obs, "projector_checkpoint", time.Hour
	})
	stop := run(t, f)
	waitUntil(t, "the five events handled", func() bool { got, _, _ := h.snapshot(); return len(got) == 5 })
	pgtest.Shorten(t, url, schema, "a", 1) // a2..a4 lost
	h.mu.Lock()
	h.saved = events[1].Position // the checkpoint as the new primary holds it
	h.leave = true
	h.mu.Unlock()
	waitUntil(t, "the leadership lost", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return !h.leave })
	b := appendB(t, store)
	waitUntil(t, "the new event handled", func() bool { got, _, _ := h.snapshot(); return got[len(got)-1] == b })
	stop()

	regs := obs.all()
	require.Len(t, regs, 1, "the regression reported once")
	require.Equal(t, ids[4], regs[0].SeenEventID)
	require.Empty(t, h.rewound(), "the checkpoint is before what was lost: no rewind")
	got, _, _ := h.snapshot()
	require.Equal(t, append(append([]string(nil), ids...), b), got)
}
