package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// told keeps what a store's head cache told its observer.
type told struct {
	mu   sync.Mutex
	regs []eventstore.Regression
}

func (t *told) ObserveRegression(_ context.Context, r eventstore.Regression) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.regs = append(t.regs, r)
}

func (t *told) all() []eventstore.Regression {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]eventstore.Regression(nil), t.regs...)
}

// headCacheRig is a store whose head cache knows stream "s" at version 2
// (it wrote events 0..2), and the ids it wrote.
func headCacheRig(t *testing.T) (*postgres.Store, *told, string, []eventstore.EventData) {
	t.Helper()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	obs := &told{}
	store.ObserveRegressions(obs)
	events := newEvents(3)
	_, err := store.Append(t.Context(), "s", eventstore.NoStream(), events)
	require.NoError(t, err)
	return store, obs, url, events
}

// TestHeadCacheNoticesAShorterStream: the store lost the stream's last
// events (a failover to an asynchronous standby). A read that reaches the
// stream's end before the version the head cache knew, or an append at
// that version, tells the observer once, naming what it had.
func TestHeadCacheNoticesAShorterStream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t.Run("read", func(t *testing.T) {
		t.Parallel()
		store, obs, url, events := headCacheRig(t)
		pgtest.Shorten(t, url, store.Schema(), "s", 0)
		got, err := store.ReadStream(ctx, "s", 2, 9) // a catch-up from the version it knew
		require.NoError(t, err)
		require.Empty(t, got)
		regs := obs.all()
		require.Len(t, regs, 1)
		require.Equal(t, eventstore.Regression{Cache: "head_cache", Stream: "s", SeenVersion: 2, SeenEventID: events[2].ID,
			HeldVersion: eventstore.NoStreamVersion, Detail: regs[0].Detail}, regs[0])
		_, err = store.ReadStream(ctx, "s", 0, 9)
		require.NoError(t, err)
		require.Len(t, obs.all(), 1, "the entry was dropped: told once")
	})
	t.Run("append", func(t *testing.T) {
		t.Parallel()
		store, obs, url, events := headCacheRig(t)
		pgtest.Shorten(t, url, store.Schema(), "s", 0)
		_, err := store.Append(ctx, "s", eventstore.Exact(2), newEvents(1))
		var wrong *eventstore.WrongExpectedVersionError
		require.ErrorAs(t, err, &wrong)
		require.Equal(t, int64(0), wrong.Actual)
		regs := obs.all()
		require.Len(t, regs, 1)
		require.Equal(t, int64(2), regs[0].SeenVersion)
		require.Equal(t, events[2].ID, regs[0].SeenEventID)
		require.Equal(t, int64(0), regs[0].HeldVersion)
	})
}

// TestHeadCacheNoticesAStreamWrittenAgain: the stream went back and
// another process wrote it up to the same version with other events. An
// append at that version by a caller that decided on the events this
// store knew is refused (the caller catches up and decides again), not
// linked after events it never saw; a row whose head alone changed
// (TestAppendLinksFromTheRowsHead) is still linked from.
func TestHeadCacheNoticesAStreamWrittenAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, obs, url, events := headCacheRig(t)
	pgtest.Shorten(t, url, store.Schema(), "s", 0)
	other := pgtest.OpenMigrated(t, url, store.Schema())
	theirs := newEvents(2)
	_, err := other.Append(ctx, "s", eventstore.Exact(0), theirs)
	require.NoError(t, err)

	_, err = store.Append(ctx, "s", eventstore.Exact(2), newEvents(1))
	var wrong *eventstore.WrongExpectedVersionError
	require.ErrorAs(t, err, &wrong, "decided on events the stream no longer holds")
	require.Equal(t, int64(2), wrong.Actual)
	regs := obs.all()
	require.Len(t, regs, 1)
	require.Equal(t, events[2].ID, regs[0].SeenEventID)
	require.Equal(t, theirs[1].ID, regs[0].HeldEventID)
	got, err := store.ReadStream(ctx, "s", 0, 9)
	require.NoError(t, err)
	require.Len(t, got, 3, "nothing written")

	_, err = store.Append(ctx, "s", eventstore.Exact(2), newEvents(1))
	require.NoError(t, err, "once caught up, the stream's head is the store's again")
	require.Len(t, obs.all(), 1)
}
