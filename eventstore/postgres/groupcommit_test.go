package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/chain"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// groupRig is a store whose appends run one statement at a time
// (MaxAppendsInFlight 1), a second store on the same schema, and a way to
// hold the first store's statement runner on an advisory lock the second
// holds, so that appends queue up and then share one statement.
type groupRig struct {
	t       *testing.T
	url     string
	schema  string
	app     string
	store   *postgres.Store // the grouping store
	other   *postgres.Store
	admin   *pgx.Conn
	blocked chan error
	release func() error
}

func newGroupRig(t *testing.T) *groupRig {
	t.Helper()
	url, schema := pgtest.Schema(t)
	other := pgtest.OpenMigrated(t, url, schema)
	app := fmt.Sprintf("pgtest_group_%d", time.Now().UnixNano())
	store, err := postgres.Open(t.Context(), postgres.Config{URL: withParam(t, url, "application_name", app), Schema: schema,
		MaxConns: 4, MaxAppendsInFlight: 1})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	admin, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.WithoutCancel(t.Context())) })
	return &groupRig{t: t, url: url, schema: schema, app: app, store: store, other: other, admin: admin}
}

// block makes the grouping store's only statement runner wait on a lock
// the other store holds, and returns once it waits.
func (g *groupRig) block() {
	t := g.t
	stream := "blocker-" + g.app
	release, err := g.other.HoldOpenAppend(t.Context(), stream, eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	g.release = release
	t.Cleanup(func() { _ = release() })
	g.blocked = make(chan error, 1)
	go func() {
		// NoStream needs no read: straight to the statement, which waits
		// for the holder's lock, and then finds the holder's stream.
		_, err := g.store.Append(t.Context(), stream, eventstore.NoStream(), newEvents(1))
		g.blocked <- err
	}()
	waitLocked(t, g.admin, g.app)
}

// unblock lets the runner go on, once want appends are queued.
func (g *groupRig) unblock(want int) {
	t := g.t
	waitQueued(t, want, g.store.QueuedAppends)
	require.NoError(t, g.release())
	require.ErrorIs(t, <-g.blocked, eventstore.ErrWrongExpectedVersion, "the blocking append finds the holder's stream")
}

// transactionIDs returns the transaction id of each stream's events (one
// per stream: the test fails if a stream's events span two).
func (g *groupRig) transactionIDs(streams ...string) map[string]uint64 {
	t := g.t
	out := make(map[string]uint64)
	for _, s := range streams {
		rows, err := g.admin.Query(t.Context(), "SELECT DISTINCT transaction_id::text::bigint FROM "+
			pgx.Identifier{g.schema, "events"}.Sanitize()+" WHERE stream_id = $1", s)
		require.NoError(t, err)
		xids, err := pgx.CollectRows(rows, pgx.RowTo[uint64])
		require.NoError(t, err)
		require.Len(t, xids, 1, "stream %s written in one transaction", s)
		out[s] = xids[0]
	}
	return out
}

type appendCall struct {
	stream   string
	expected eventstore.ExpectedVersion
	events   []eventstore.EventData
}

type appendAnswer struct {
	res eventstore.AppendResult
	err error
}

// appendAll starts every call at once and returns a function that waits for
// their answers.
func (g *groupRig) appendAll(calls []appendCall) func() []appendAnswer {
	answers := make([]appendAnswer, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() {
			res, err := g.store.Append(g.t.Context(), c.stream, c.expected, c.events)
			answers[i] = appendAnswer{res, err}
		})
	}
	return func() []appendAnswer { wg.Wait(); return answers }
}

// TestGroupCommitSharesOneStatement: appends to different streams queued
// behind a running statement go out together in one transaction, and each
// keeps its own result: a conflict (a version another store moved) is
// refused with the actual version and writes nothing, a resend of an
// append already stored succeeds at its first versions without writing
// again, and the others are written, chained from their streams' heads.
func TestGroupCommitSharesOneStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := newGroupRig(t)
	resent := newEvents(2)
	_, err := g.store.Append(ctx, "resent", eventstore.NoStream(), resent)
	require.NoError(t, err)
	before, err := g.store.ReadStream(ctx, "resent", 0, 10)
	require.NoError(t, err)
	_, err = g.store.Append(ctx, "moved", eventstore.NoStream(), newEvents(2)) // the store knows its head at 1
	require.NoError(t, err)
	_, err = g.other.Append(ctx, "moved", eventstore.Exact(1), newEvents(1)) // and another store moves it to 2
	require.NoError(t, err)
	_, err = g.store.Append(ctx, "exact", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)

	g.block()
	wait := g.appendAll([]appendCall{
		{"fresh-a", eventstore.NoStream(), newEvents(2)},
		{"fresh-b", eventstore.NoStream(), newEvents(1)},
		{"moved", eventstore.Exact(1), newEvents(1)},
		{"resent", eventstore.NoStream(), resent},
		{"exact", eventstore.Exact(0), newEvents(3)},
	})
	g.unblock(5)
	answers := wait()

	require.NoError(t, answers[0].err)
	require.Equal(t, int64(1), answers[0].res.NextExpectedVersion)
	require.NoError(t, answers[1].err)
	require.Equal(t, int64(0), answers[1].res.NextExpectedVersion)
	var wrong *eventstore.WrongExpectedVersionError
	require.True(t, errors.As(answers[2].err, &wrong), "the conflict is refused: %v", answers[2].err)
	require.Equal(t, int64(2), wrong.Actual)
	require.NoError(t, answers[3].err, "the resend succeeds")
	require.Equal(t, int64(1), answers[3].res.NextExpectedVersion)
	require.NoError(t, answers[4].err)
	require.Equal(t, int64(3), answers[4].res.NextExpectedVersion)

	xids := g.transactionIDs("fresh-a", "fresh-b")
	require.Equal(t, xids["fresh-a"], xids["fresh-b"], "the two new streams were written in one transaction")
	exact, err := g.store.ReadStream(ctx, "exact", 0, 10)
	require.NoError(t, err)
	require.Len(t, exact, 4)
	require.Equal(t, xids["fresh-a"], exact[1].Position.(postgres.Position).TransactionID, "and the exact append with them")
	requireChained(t, exact)

	moved, err := g.store.ReadStream(ctx, "moved", 0, 10)
	require.NoError(t, err)
	require.Len(t, moved, 3, "the refused append wrote nothing")
	after, err := g.store.ReadStream(ctx, "resent", 0, 10)
	require.NoError(t, err)
	require.Len(t, after, 2, "the resend wrote nothing")
	for i := range after {
		require.Equal(t, before[i].Hash, after[i].Hash, "the resend kept the stored hashes")
	}
}

// TestGroupCommitOneBadAppendFailsNoOther: an append whose event id is
// already stored in another stream makes its shared statement fail (a
// unique violation); every append of that statement is then run alone, so
// the others are written and only the bad one is refused.
func TestGroupCommitOneBadAppendFailsNoOther(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := newGroupRig(t)
	taken := newEvents(1)
	_, err := g.store.Append(ctx, "owner", eventstore.NoStream(), taken)
	require.NoError(t, err)

	g.block()
	wait := g.appendAll([]appendCall{
		{"good-a", eventstore.NoStream(), newEvents(1)},
		{"thief", eventstore.NoStream(), append(newEvents(1), taken...)},
		{"good-b", eventstore.NoStream(), newEvents(2)},
	})
	g.unblock(3)
	answers := wait()
	require.NoError(t, answers[0].err)
	require.ErrorIs(t, answers[1].err, eventstore.ErrWrongExpectedVersion)
	require.NoError(t, answers[2].err)
	for stream, n := range map[string]int{"good-a": 1, "thief": 0, "good-b": 2} {
		got, err := g.store.ReadStream(ctx, stream, 0, 10)
		require.NoError(t, err)
		require.Len(t, got, n, stream)
	}
}

// TestAppendLinksFromTheRowsHead: when the streams row's head hash is not
// the one the store remembers for that version (the row was changed behind
// its back), the statement refuses the cached links, and the append links
// from the row's head instead, as the statement always did: no spurious
// conflict, and the chain continues from what the row says.
func TestAppendLinksFromTheRowsHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := newGroupRig(t)
	_, err := g.store.Append(ctx, "s", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	forged := chain.Link(chain.Genesis, 42, chain.Genesis)
	_, err = g.admin.Exec(ctx, "UPDATE "+pgx.Identifier{g.schema, "streams"}.Sanitize()+" SET head_hash = $1 WHERE stream_id = 's'", forged[:])
	require.NoError(t, err)
	res, err := g.store.Append(ctx, "s", eventstore.Exact(0), newEvents(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), res.NextExpectedVersion)
	got, err := g.store.ReadStream(ctx, "s", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, forged[:], got[1].PrevHash, "linked from the row's head")
}

// TestGroupCommitNoDeadlock: two stores, each grouping the appends of many
// goroutines, append to an overlapping set of streams at once. Their
// statements lock streams in key order, so none waits on another in a
// cycle: every append succeeds, and every stream's versions are in order
// in the global log.
func TestGroupCommitNoDeadlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	stores := []*postgres.Store{pgtest.OpenMigrated(t, url, schema), pgtest.OpenMigrated(t, url, schema)}
	const (
		perStore  = 6
		perWriter = 15
	)
	streams := []string{"shared-0", "shared-1", "shared-2", "shared-3", "shared-4"}
	errs := make(chan error, 2*perStore)
	var wg sync.WaitGroup
	for si, store := range stores {
		for w := range perStore {
			wg.Go(func() {
				for i := range perWriter {
					stream := streams[(si+w+i)%len(streams)]
					if _, err := store.Append(ctx, stream, eventstore.Any(), newEvents(1+i%2)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	total := 0
	for _, s := range streams {
		got, err := stores[0].ReadStream(ctx, s, 0, 1000)
		require.NoError(t, err)
		requireChained(t, got)
		total += len(got)
	}
	all := waitVisible(t, stores[0], total)
	last := map[string]int64{}
	for _, e := range all {
		prev, ok := last[e.StreamID]
		if !ok {
			prev = -1
		}
		require.Equal(t, prev+1, e.Version, "stream %s in version order in the global log", e.StreamID)
		last[e.StreamID] = e.Version
	}
}

// requireChained checks events (a whole stream from version 0) link from
// the genesis value, each to the one before.
func requireChained(t *testing.T, events []eventstore.RecordedEvent) {
	t.Helper()
	prev := chain.Genesis
	for i, e := range events {
		require.Equal(t, int64(i), e.Version)
		r, err := chain.Recompute(e.StreamID, e.ID, e.Type, e.Version, e.Data, e.Metadata, e.PrevHash, e.Hash)
		require.NoError(t, err)
		require.True(t, r.Matches(), "event %d's hash", i)
		require.Equal(t, prev, r.Prev, "event %d links to the one before", i)
		prev = r.Hash
	}
}
