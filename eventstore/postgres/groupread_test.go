package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// readRig is a store whose stream reads run one statement at a time
// (MaxReadsInFlight 1), a second store on the same schema, and a way to hold the first store's read runner on a lock of the
// events table, so that reads queue up and then share one statement.
type readRig struct {
	t       *testing.T
	schema  string
	app     string
	store   *postgres.Store // the grouping store
	other   *postgres.Store // its reads, one at a time, run alone
	admin   *pgx.Conn
	lock    pgx.Tx
	blocked chan error
}

func newReadRig(t *testing.T) *readRig {
	t.Helper()
	url, schema := pgtest.Schema(t)
	other := pgtest.OpenMigrated(t, url, schema)
	app := fmt.Sprintf("pgtest_read_%d", time.Now().UnixNano())
	store, err := postgres.Open(t.Context(), postgres.Config{URL: withParam(t, url, "application_name", app), Schema: schema,
		MaxConns: 4, MaxReadsInFlight: 1})
	require.NoError(t, err)
	t.Cleanup(store.Close)
	admin, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.WithoutCancel(t.Context())) })
	return &readRig{t: t, schema: schema, app: app, store: store, other: other, admin: admin}
}

// block makes the grouping store's only read runner wait on a lock of the
// events table, and returns once it waits.
func (r *readRig) block() {
	t := r.t
	tx, err := r.admin.Begin(t.Context())
	require.NoError(t, err)
	_, err = tx.Exec(t.Context(), "LOCK TABLE "+pgx.Identifier{r.schema, "events"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	r.lock = tx
	t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(t.Context())) })
	r.blocked = make(chan error, 1)
	go func() {
		_, err := r.store.ReadStream(t.Context(), "blocker", 0, 10)
		r.blocked <- err
	}()
	waitLocked(t, r.admin, r.app)
}

// waitLocked returns once a statement of application app waits on a lock.
func waitLocked(t *testing.T, admin *pgx.Conn, app string) {
	t.Helper()
	for range 2000 { // bounded poll: the statement reaches its lock wait in milliseconds
		var n int
		require.NoError(t, admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the blocking statement never waited on its lock")
}

// waitQueued returns once queued says want requests wait behind the
// blocked statement.
func waitQueued(t *testing.T, want int, queued func() int) {
	t.Helper()
	for range 2000 { // bounded poll: requests queue in microseconds
		if queued() == want {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, want, queued(), "requests queued behind the blocked statement")
}

// unblock lets the runner go on.
func (r *readRig) unblock() {
	t := r.t
	require.NoError(t, r.lock.Rollback(t.Context()))
	require.NoError(t, <-r.blocked, "the blocking read")
}

type readCall struct {
	stream string
	from   int64
	limit  int
	ctx    context.Context
}

type readAnswer struct {
	events []eventstore.RecordedEvent
	err    error
}

// readAll starts every call at once and returns a function that waits for
// their answers.
func (r *readRig) readAll(calls []readCall) func() []readAnswer {
	answers := make([]readAnswer, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		ctx := c.ctx
		if ctx == nil {
			ctx = r.t.Context()
		}
		wg.Go(func() {
			events, err := r.store.ReadStream(ctx, c.stream, c.from, c.limit)
			answers[i] = readAnswer{events, err}
		})
	}
	return func() []readAnswer { wg.Wait(); return answers }
}

// TestGroupReadSharesOneStatement: stream reads queued behind a running
// read go out together in one statement, and each gets exactly what its
// own statement would have returned: its stream's events from its first
// version, at most its limit, none of another read's.
func TestGroupReadSharesOneStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newReadRig(t)
	for stream, n := range map[string]int{"a": 5, "b": 1, "c": 3} {
		_, err := r.other.Append(ctx, stream, eventstore.NoStream(), newEvents(n))
		require.NoError(t, err)
	}
	calls := []readCall{
		{stream: "a", from: 0, limit: 100},
		{stream: "a", from: 2, limit: 2},
		{stream: "b", from: 0, limit: 10},
		{stream: "missing", from: 0, limit: 10},
		{stream: "c", from: 3, limit: 10}, // past the end
		{stream: "c", from: -4, limit: 1}, // before the start: from 0
		{stream: "a", from: 4, limit: 1000},
	}
	statements, reads := r.store.GroupReadStats()
	r.block()
	wait := r.readAll(calls)
	waitQueued(t, len(calls), r.store.QueuedReads)
	r.unblock()
	answers := wait()
	after, afterReads := r.store.GroupReadStats()
	require.Equal(t, int64(2), after-statements, "the blocked read's statement and one for every queued read")
	require.Equal(t, int64(len(calls)+1), afterReads-reads)

	for i, c := range calls {
		require.NoError(t, answers[i].err, c.stream)
		want, err := r.other.ReadStream(ctx, c.stream, c.from, c.limit)
		require.NoError(t, err)
		require.Equal(t, want, answers[i].events, "read %d (%s from %d, limit %d) as alone", i, c.stream, c.from, c.limit)
	}
	require.Len(t, answers[0].events, 5)
	require.Len(t, answers[1].events, 2)
	require.Equal(t, int64(2), answers[1].events[0].Version)
	require.Empty(t, answers[3].events)
	require.NotNil(t, answers[3].events, "an empty read is empty, not nil, as alone")
	require.Empty(t, answers[4].events)
	require.Len(t, answers[5].events, 1)
}

// TestGroupReadOneBadReadFailsNoOther: a read PostgreSQL refuses (a stream
// name that is not UTF-8) makes its shared statement fail; every read of
// that statement is then run alone, so only the bad one fails.
func TestGroupReadOneBadReadFailsNoOther(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newReadRig(t)
	_, err := r.other.Append(ctx, "good", eventstore.NoStream(), newEvents(2))
	require.NoError(t, err)
	r.block()
	wait := r.readAll([]readCall{
		{stream: "good", limit: 10},
		{stream: "bad-\xff\xfe", limit: 10},
		{stream: "good", from: 1, limit: 10},
	})
	waitQueued(t, 3, r.store.QueuedReads)
	r.unblock()
	answers := wait()
	require.NoError(t, answers[0].err)
	require.Len(t, answers[0].events, 2)
	require.Error(t, answers[1].err, "the bad read fails")
	require.NotErrorIs(t, answers[1].err, eventstore.ErrUnavailable)
	require.NoError(t, answers[2].err)
	require.Len(t, answers[2].events, 1)
}

// TestGroupReadCallerGoneWhileQueued: a read whose caller gives up while it
// is queued leaves the queue with its context's error; the others are
// answered.
func TestGroupReadCallerGoneWhileQueued(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := newReadRig(t)
	_, err := r.other.Append(ctx, "kept", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	gone, cancel := context.WithCancel(ctx)
	r.block()
	wait := r.readAll([]readCall{{stream: "kept", limit: 10}, {stream: "kept", limit: 10, ctx: gone}})
	waitQueued(t, 2, r.store.QueuedReads)
	cancel()
	waitQueued(t, 1, r.store.QueuedReads)
	r.unblock()
	answers := wait()
	require.NoError(t, answers[0].err)
	require.Len(t, answers[0].events, 1)
	require.ErrorIs(t, answers[1].err, context.Canceled)
}
