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
	defer follow.SetMarkSpacing(0)()
	store, url, schema, ids := pgLog(t, 5)
	h := &rewinder{}
	obs := &observed{}
	f := newFollower(t, store, h, func(c *follow.Config[int]) {
		c.BatchSize = 1
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
	events, err := store.ReadAll(t.Context(), nil, 10)
	require.NoError(t, err)
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
