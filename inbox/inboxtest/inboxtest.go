// Package inboxtest is the suite that shows an inbox's guarantees against
// your own database, schema and table: run it from a test of yours with
// the inbox.Config your consumer uses.
//
//	func TestInbox(t *testing.T) {
//		pool := ... // your database
//		inboxtest.Run(t, pool, inbox.Config{Schema: "refunds", Table: "inbox"})
//	}
//
// It migrates the table (inbox.Migrate: IF NOT EXISTS), and works under
// consumer names of its own (inboxtest-<random>), so it never reads or
// deletes your consumers' ids; it counts effects in a table it creates
// beside yours (inboxtest_effects_<random>) and drops at the end, and
// deletes its own ids from the inbox table at the end.
package inboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/inbox"
)

// waitBound bounds every wait for a condition.
const waitBound = 30 * time.Second

// Run runs every case against pool with cfg's schema and table (its
// Consumer, Retention and Now are the suite's own). pool needs at least
// three connections.
func Run(t *testing.T, pool *pgxpool.Pool, cfg inbox.Config) {
	t.Helper()
	s := &suite{pool: pool, cfg: cfg}
	s.setUp(t)
	for _, c := range []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"RedeliveryLeavesOneEffect", redelivery},
		{"ConcurrentDuplicateWaitsAndIsDuplicate", concurrentDuplicate},
		{"ConcurrentDuplicateHandlesWhenFirstRollsBack", concurrentRollback},
		{"CrashBeforeCommitLeavesNeither", crashBeforeCommit},
		{"FailureAndPanicLeaveNeither", failureAndPanic},
		{"HandleTxInTheCallersTransaction", handleTx},
		{"ConsumersAreApart", consumersApart},
		{"RetentionAndPruneInBoundedBatches", retention},
		{"InvalidIDsRefused", invalidIDs},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

type suite struct {
	pool    *pgxpool.Pool
	cfg     inbox.Config
	effects string // quoted effects table
	prefix  string // of every consumer name the suite uses
}

func random() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *suite) setUp(t *testing.T) {
	ctx := t.Context()
	s.prefix = "inboxtest-" + random() + "-"
	ib := s.inbox(t, "setup", time.Now)
	require.NoError(t, ib.Migrate(ctx, s.pool))
	schema := s.cfg.Schema
	if schema == "" {
		schema = "public"
	}
	s.effects = pgx.Identifier{schema, "inboxtest_effects_" + random()}.Sanitize()
	_, err := s.pool.Exec(ctx, `CREATE TABLE `+s.effects+` (consumer text NOT NULL, message_id text NOT NULL, effect text NOT NULL)`)
	require.NoError(t, err)
	table := pgx.Identifier{schema, cmpOr(s.cfg.Table, "inbox")}.Sanitize()
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_, _ = s.pool.Exec(ctx, `DROP TABLE IF EXISTS `+s.effects)
		_, _ = s.pool.Exec(ctx, `DELETE FROM `+table+` WHERE starts_with(consumer, $1)`, s.prefix)
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// inbox is an inbox under the suite's consumer name, on clock now.
func (s *suite) inbox(t *testing.T, consumer string, now func() time.Time) *inbox.Inbox {
	t.Helper()
	cfg := s.cfg
	cfg.Consumer, cfg.Now, cfg.Retention = s.prefix+consumer, now, time.Hour
	ib, err := inbox.New(cfg)
	require.NoError(t, err)
	return ib
}

// effect is a Func whose business change is one row in the effects table.
func (s *suite) effect(ib *inbox.Inbox, msg, what string) inbox.Func {
	return func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+s.effects+` VALUES ($1, $2, $3)`, ib.Consumer(), msg, what)
		return err
	}
}

// count is how many effects msg had under ib's consumer.
func (s *suite) count(t *testing.T, ib *inbox.Inbox, msg string) int {
	t.Helper()
	var n int
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+s.effects+` WHERE consumer = $1 AND message_id = $2`,
		ib.Consumer(), msg).Scan(&n))
	return n
}

func (s *suite) seen(t *testing.T, ib *inbox.Inbox, msg string) bool {
	t.Helper()
	seen, err := ib.Seen(t.Context(), s.pool, msg)
	require.NoError(t, err)
	return seen
}

// A message handled, then delivered again (an acknowledgement lost, a
// relay publishing again, a reader resumed from an older position), and
// again: one effect; the copies are Duplicate.
func redelivery(t *testing.T, s *suite) {
	ib := s.inbox(t, "redelivery", time.Now)
	for i := range 3 {
		res, err := ib.Handle(t.Context(), s.pool, "MSG-1", s.effect(ib, "MSG-1", "refund issued"))
		require.NoError(t, err)
		want := inbox.Duplicate
		if i == 0 {
			want = inbox.Handled
		}
		require.Equal(t, want, res, "delivery %d", i+1)
	}
	require.Equal(t, 1, s.count(t, ib, "MSG-1"))
	require.True(t, s.seen(t, ib, "MSG-1"))
}

// blocked waits until a backend waits on a lock the backend pid holds.
func (s *suite) blocked(t *testing.T, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		var n int
		require.NoError(t, s.pool.QueryRow(t.Context(),
			`SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, int(pid)).Scan(&n))
		if n > 0 {
			return
		}
		require.False(t, time.Now().After(deadline), "no backend waited on %d within %s", pid, waitBound)
		time.Sleep(5 * time.Millisecond) // polling interval, bounded above
	}
}

// race starts instance A's handling of msg, holds it open after its effect
// (its transaction not yet ended) until instance B's Handle of the same id
// is waiting on A, then lets A end with endA; it returns both results.
func (s *suite) race(t *testing.T, ib *inbox.Inbox, msg string, endA error) (a, b inbox.Result, errA, errB error) {
	t.Helper()
	inEffect := make(chan uint32, 1)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		a, errA = ib.Handle(t.Context(), s.pool, msg, func(ctx context.Context, tx pgx.Tx) error {
			if err := s.effect(ib, msg, "instance A")(ctx, tx); err != nil {
				return err
			}
			inEffect <- tx.Conn().PgConn().PID()
			<-release
			return endA
		})
	})
	var pidA uint32
	select {
	case pidA = <-inEffect:
	case <-time.After(waitBound):
		t.Fatal("instance A never reached its effect")
	}
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		b, errB = ib.Handle(t.Context(), s.pool, msg, s.effect(ib, msg, "instance B"))
	}()
	s.blocked(t, pidA) // B waits on A's record of the id
	close(release)
	wg.Wait()
	select {
	case <-bDone:
	case <-time.After(waitBound):
		t.Fatal("instance B did not finish once A ended")
	}
	return a, b, errA, errB
}

// Two instances on the same message at once: the second waits on the
// first's record of the id; the first commits; the second is Duplicate.
// One effect.
func concurrentDuplicate(t *testing.T, s *suite) {
	ib := s.inbox(t, "race", time.Now)
	a, b, errA, errB := s.race(t, ib, "MSG-RACE", nil)
	require.NoError(t, errA)
	require.NoError(t, errB)
	require.Equal(t, inbox.Handled, a)
	require.Equal(t, inbox.Duplicate, b)
	require.Equal(t, 1, s.count(t, ib, "MSG-RACE"))
}

// The same race, but the first instance fails after its effect and rolls
// back: the second handles the message. One effect, the second's.
func concurrentRollback(t *testing.T, s *suite) {
	ib := s.inbox(t, "race-rollback", time.Now)
	failed := errors.New("instance A failed")
	_, b, errA, errB := s.race(t, ib, "MSG-RACE-2", failed)
	require.ErrorIs(t, errA, failed)
	require.NoError(t, errB)
	require.Equal(t, inbox.Handled, b)
	require.Equal(t, 1, s.count(t, ib, "MSG-RACE-2"))
	var who string
	require.NoError(t, s.pool.QueryRow(t.Context(), `SELECT effect FROM `+s.effects+` WHERE consumer = $1`, ib.Consumer()).Scan(&who))
	require.Equal(t, "instance B", who)
}

// The consumer dies after its business write and before the commit (its
// connection cut, as a killed process's is): neither the effect nor the
// record stays, and the redelivery handles it. One effect.
func crashBeforeCommit(t *testing.T, s *suite) {
	ib := s.inbox(t, "crash", time.Now)
	_, err := ib.Handle(t.Context(), s.pool, "MSG-CRASH", func(ctx context.Context, tx pgx.Tx) error {
		if err := s.effect(ib, "MSG-CRASH", "before the crash")(ctx, tx); err != nil {
			return err
		}
		pid := tx.Conn().PgConn().PID()
		_, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int(pid))
		return err
	})
	require.Error(t, err, "the commit on a terminated connection fails")
	require.Equal(t, 0, s.count(t, ib, "MSG-CRASH"))
	require.False(t, s.seen(t, ib, "MSG-CRASH"))
	res, err := ib.Handle(t.Context(), s.pool, "MSG-CRASH", s.effect(ib, "MSG-CRASH", "redelivered"))
	require.NoError(t, err)
	require.Equal(t, inbox.Handled, res)
	require.Equal(t, 1, s.count(t, ib, "MSG-CRASH"))
}

// A handler that fails, or panics, after its write leaves neither; the
// redelivery handles the message.
func failureAndPanic(t *testing.T, s *suite) {
	ib := s.inbox(t, "failure", time.Now)
	boom := errors.New("boom")
	_, err := ib.Handle(t.Context(), s.pool, "MSG-F", func(ctx context.Context, tx pgx.Tx) error {
		require.NoError(t, s.effect(ib, "MSG-F", "failed")(ctx, tx))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.PanicsWithValue(t, "handler panicked", func() {
		_, _ = ib.Handle(t.Context(), s.pool, "MSG-F", func(ctx context.Context, tx pgx.Tx) error {
			require.NoError(t, s.effect(ib, "MSG-F", "panicked")(ctx, tx))
			panic("handler panicked")
		})
	})
	require.Equal(t, 0, s.count(t, ib, "MSG-F"))
	require.False(t, s.seen(t, ib, "MSG-F"))
	res, err := ib.Handle(t.Context(), s.pool, "MSG-F", s.effect(ib, "MSG-F", "ok"))
	require.NoError(t, err)
	require.Equal(t, inbox.Handled, res)
	require.Equal(t, 1, s.count(t, ib, "MSG-F"))
}

// HandleTx joins the caller's transaction: a rollback takes the record
// with it; a commit keeps both; a duplicate writes nothing.
func handleTx(t *testing.T, s *suite) {
	ib := s.inbox(t, "tx", time.Now)
	ctx := t.Context()
	in := func(commit bool) inbox.Result {
		tx, err := s.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		res, err := ib.HandleTx(ctx, tx, "MSG-TX", s.effect(ib, "MSG-TX", "in the caller's transaction"))
		require.NoError(t, err)
		if commit {
			require.NoError(t, tx.Commit(ctx))
		}
		return res
	}
	require.Equal(t, inbox.Handled, in(false))
	require.False(t, s.seen(t, ib, "MSG-TX"), "rolled back with the caller's transaction")
	require.Equal(t, inbox.Handled, in(true))
	require.Equal(t, inbox.Duplicate, in(true))
	require.Equal(t, 1, s.count(t, ib, "MSG-TX"))
}

// Two consumers of one message each handle it once: ids are per consumer.
func consumersApart(t *testing.T, s *suite) {
	for _, name := range []string{"portal", "finance"} {
		ib := s.inbox(t, name, time.Now)
		for range 2 {
			_, err := ib.Handle(t.Context(), s.pool, "MSG-SHARED", s.effect(ib, "MSG-SHARED", name))
			require.NoError(t, err)
		}
		require.Equal(t, 1, s.count(t, ib, "MSG-SHARED"), name)
	}
}

// An id is kept for the retention (an hour here): Prune deletes only ids
// handled longer ago, at most a batch per statement; an id pruned is
// handled again when it comes again (the stated boundary), one still kept
// is not.
func retention(t *testing.T, s *suite) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	ib := s.inbox(t, "retention", clock)
	ctx := t.Context()
	for i := range 5 {
		_, err := ib.Handle(ctx, s.pool, fmt.Sprintf("MSG-OLD-%d", i), s.effect(ib, "old", "x"))
		require.NoError(t, err)
	}
	advance(ib.Retention() - time.Second)
	_, err := ib.Handle(ctx, s.pool, "MSG-RECENT", s.effect(ib, "recent", "x"))
	require.NoError(t, err)
	n, err := ib.Prune(ctx, s.pool, 2)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is past the retention yet")

	advance(2 * time.Second) // the five are past it, the recent one is not
	n, err = ib.PruneBatch(ctx, s.pool, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "one statement deletes at most a batch")
	n, err = ib.Prune(ctx, s.pool, 2)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	for i := range 5 {
		require.False(t, s.seen(t, ib, fmt.Sprintf("MSG-OLD-%d", i)))
	}
	require.True(t, s.seen(t, ib, "MSG-RECENT"))
	res, err := ib.Handle(ctx, s.pool, "MSG-RECENT", s.effect(ib, "recent", "x"))
	require.NoError(t, err)
	require.Equal(t, inbox.Duplicate, res, "within the retention")
	res, err = ib.Handle(ctx, s.pool, "MSG-OLD-0", s.effect(ib, "old", "x"))
	require.NoError(t, err)
	require.Equal(t, inbox.Handled, res, "past the retention and pruned: handled again (make the effect idempotent too)")
	_, err = ib.PruneBatch(ctx, s.pool, inbox.MaxPruneBatch+1)
	require.Error(t, err)
}

// Ids that are empty, too long, not UTF-8 or hold NUL are refused before
// anything runs.
func invalidIDs(t *testing.T, s *suite) {
	ib := s.inbox(t, "invalid", time.Now)
	ran := false
	for _, id := range []string{"", string(make([]byte, inbox.MaxMessageIDLength+1)), "MSG-\xff", "MSG-\x00"} {
		_, err := ib.Handle(t.Context(), s.pool, id, func(context.Context, pgx.Tx) error { ran = true; return nil })
		require.ErrorIs(t, err, inbox.ErrInvalidMessageID, "%q", id)
	}
	require.False(t, ran)
}
