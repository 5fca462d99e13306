package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/feed"
	"opledger/eventstore/postgres/pgtest"
	"opledger/inbox"
)

// TestRefundsIssued: three refunds executed by a real worker at
// provider-sim, followed from serve's feed by the example consumer; each
// case on a schema of its own ends with one row per refund in
// refunds_issued, whatever was delivered again.
func TestRefundsIssued(t *testing.T) {
	t.Parallel()
	s := startSystem(t)
	ops := []string{s.refund("portal-1", 1_200), s.refund("portal-2", 3_400), s.refund("portal-3", 5_600)}
	all := waitCompleted(t, s, ops)

	t.Run("Redelivery", func(t *testing.T) {
		c := newConsumer(t, "portal")
		counts := catchUp(t, s, c)
		require.Equal(t, len(all), counts[inbox.Handled], "%v", counts)
		requireRows(t, c, ops)
		// Every entry delivered again, and again: Duplicate, nothing changes.
		for range 2 {
			for _, e := range all {
				res, err := c.Handle(t.Context(), e, "")
				require.NoError(t, err)
				require.Equal(t, inbox.Duplicate, res, e.EventID)
			}
		}
		requireRows(t, c, ops)
	})

	t.Run("TwoInstancesRacing", func(t *testing.T) {
		a := newConsumer(t, "portal")
		b := a.twin(t) // another instance: its own pool, the same schema and name
		done := completedEntry(t, all, ops[0])
		inWrite, release := make(chan uint32, 1), make(chan struct{})
		a.afterWrite = func(ctx context.Context, tx pgx.Tx) error {
			inWrite <- tx.Conn().PgConn().PID()
			<-release
			return nil
		}
		var resA inbox.Result
		var errA error
		var wg sync.WaitGroup
		wg.Go(func() { resA, errA = a.Handle(context.WithoutCancel(t.Context()), done, "") })
		pid := <-inWrite // bounded: a.Handle reaches its write at once
		var resB inbox.Result
		var errB error
		wg.Go(func() { resB, errB = b.Handle(context.WithoutCancel(t.Context()), done, "") })
		waitBlockedOn(t, a.pool, pid) // b waits on a's record of the event id
		close(release)
		wg.Wait()
		require.NoError(t, errA)
		require.NoError(t, errB)
		require.Equal(t, inbox.Handled, resA)
		require.Equal(t, inbox.Duplicate, resB)
		a.afterWrite = nil

		// Then both follow the whole feed at once.
		var both sync.WaitGroup
		for _, c := range []*Consumer{a, b} {
			both.Go(func() { catchUp(t, s, c) })
		}
		both.Wait()
		requireRows(t, a, ops)
	})

	t.Run("CrashAfterWriteBeforeCommit", func(t *testing.T) {
		c := newConsumer(t, "portal")
		done := completedEntry(t, all, ops[1])
		crashed := false
		c.afterWrite = func(ctx context.Context, tx pgx.Tx) error {
			if crashed {
				return nil
			}
			crashed = true
			// The process dies here: its connection goes, and with it the
			// transaction holding the row and the event id.
			_, err := c.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, int(tx.Conn().PgConn().PID()))
			return err
		}
		_, err := c.Handle(t.Context(), done, done.Position)
		require.Error(t, err)
		require.Zero(t, countRows(t, c), "the write died with its transaction")
		seen, err := c.inbox.Seen(t.Context(), c.pool, done.EventID)
		require.NoError(t, err)
		require.False(t, seen, "and so did the record of the event id")
		pos, err := c.Position(t.Context())
		require.NoError(t, err)
		require.Empty(t, pos, "the position did not move")
		// Restarted, it follows the feed from where it stood: the entry is
		// delivered again and handled once.
		counts := catchUp(t, s, c)
		require.Equal(t, len(all), counts[inbox.Handled])
		requireRows(t, c, ops)
	})

	t.Run("ResumedFromAnOlderPosition", func(t *testing.T) {
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c := newConsumer(t, "portal")
		var err error
		c.inbox, err = inbox.New(inbox.Config{Schema: c.schemaName, Table: "inbox", Consumer: c.name, Now: clock, Retention: time.Hour})
		require.NoError(t, err)
		require.Equal(t, len(all), catchUp(t, s, c)[inbox.Handled])

		// Rewound to an older position (a restored backup, a reset offset):
		// the same entries again, every one a Duplicate.
		setPosition(t, c, all[1].Position)
		counts := catchUp(t, s, c)
		require.Equal(t, len(all)-2, counts[inbox.Duplicate])
		require.Zero(t, counts[inbox.Handled])
		requireRows(t, c, ops)

		// Rewound past the inbox's retention (its ids pruned): handled
		// again, and the UPSERT still leaves one row per refund.
		mu.Lock()
		now = now.Add(2 * time.Hour)
		mu.Unlock()
		pruned, err := c.inbox.Prune(t.Context(), c.pool, 2)
		require.NoError(t, err)
		require.EqualValues(t, len(all), pruned)
		setPosition(t, c, "")
		require.Equal(t, len(all), catchUp(t, s, c)[inbox.Handled])
		requireRows(t, c, ops)
	})
}

// newConsumer is a consumer named name on a schema of t's own, migrated.
func newConsumer(t *testing.T, name string) *Consumer {
	t.Helper()
	url, schema := pgtest.Schema(t)
	pool := openPool(t, url)
	c, err := NewConsumer(pool, schema, name)
	require.NoError(t, err)
	require.NoError(t, c.Migrate(t.Context()))
	return c
}

// twin is another instance of c: a pool of its own on c's schema and name.
func (c *Consumer) twin(t *testing.T) *Consumer {
	t.Helper()
	other, err := NewConsumer(openPool(t, c.pool.Config().ConnString()), c.schemaName, c.name)
	require.NoError(t, err)
	return other
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// follower reads s's feed without waiting (the tests read to the end).
func follower(s *system) *HTTPFollower {
	return &HTTPFollower{BaseURL: s.api, Token: subscriberToken, Wait: time.Millisecond, Limit: 5,
		Log: slog.New(slog.DiscardHandler)}
}

// catchUp follows the feed from c's position to its end, as
// HTTPFollower.Run does, and counts what became of each entry.
func catchUp(t *testing.T, s *system, c *Consumer) map[inbox.Result]int {
	t.Helper()
	f := follower(s)
	after, err := c.Position(t.Context())
	require.NoError(t, err)
	counts := map[inbox.Result]int{}
	for range 1000 { // bound: a few pages
		page, _, err := f.read(t.Context(), after)
		require.NoError(t, err)
		for _, e := range page.Entries {
			res, err := c.Handle(t.Context(), e, e.Position)
			require.NoError(t, err)
			counts[res]++
		}
		if page.Next != "" {
			require.NoError(t, c.savePosition(t.Context(), c.pool, page.Next))
			after = page.Next
		}
		if !page.More {
			return counts
		}
	}
	t.Fatal("the feed did not end")
	return nil
}

// waitCompleted reads the feed until each of ops has a Completed entry and
// returns every entry read.
func waitCompleted(t *testing.T, s *system, ops []string) []feed.Entry {
	t.Helper()
	f := follower(s)
	var all []feed.Entry
	after := ""
	deadline := time.Now().Add(waitBound)
	for {
		page, _, err := f.read(t.Context(), after)
		require.NoError(t, err)
		all, after = append(all, page.Entries...), page.Next
		missing := len(ops)
		for _, op := range ops {
			for _, e := range all {
				if string(e.OperationID) == op && e.Outcome == domain.Completed {
					missing--
					break
				}
			}
		}
		if missing == 0 {
			return all
		}
		require.False(t, time.Now().After(deadline), "the worker did not complete %d refunds within %s", missing, waitBound)
		if !page.More {
			f.Wait = time.Second // long-poll the rest
		}
	}
}

func completedEntry(t *testing.T, all []feed.Entry, op string) feed.Entry {
	t.Helper()
	for _, e := range all {
		if string(e.OperationID) == op && e.Outcome == domain.Completed {
			return e
		}
	}
	t.Fatalf("no completed entry of %s", op)
	return feed.Entry{}
}

func countRows(t *testing.T, c *Consumer) int {
	t.Helper()
	var n int
	require.NoError(t, c.pool.QueryRow(t.Context(), `SELECT count(*) FROM `+c.schema+`.refunds_issued`).Scan(&n))
	return n
}

// requireRows: refunds_issued holds exactly one row per refund of ops,
// each with its amount and the provider's reference.
func requireRows(t *testing.T, c *Consumer, ops []string) {
	t.Helper()
	rows, err := c.pool.Query(t.Context(), `SELECT operation_id, amount_minor, provider_reference FROM `+c.schema+`.refunds_issued ORDER BY amount_minor`)
	require.NoError(t, err)
	type row struct {
		op     string
		amount int64
		ref    string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.op, &x.amount, &x.ref)
	})
	require.NoError(t, err)
	require.Len(t, got, len(ops))
	for i, op := range ops {
		require.Equal(t, op, got[i].op)
		require.Equal(t, int64(1_200+2_200*i), got[i].amount)
		require.NotEmpty(t, got[i].ref, "the provider's reference")
	}
}

func setPosition(t *testing.T, c *Consumer, position string) {
	t.Helper()
	if position == "" {
		_, err := c.pool.Exec(t.Context(), `DELETE FROM `+c.schema+`.feed_position WHERE consumer = $1`, c.name)
		require.NoError(t, err)
		return
	}
	require.NoError(t, c.savePosition(t.Context(), c.pool, position))
}

// waitBlockedOn waits until a backend waits on a lock pid holds.
func waitBlockedOn(t *testing.T, pool *pgxpool.Pool, pid uint32) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		var n int
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, int(pid)).Scan(&n))
		if n > 0 {
			return
		}
		require.False(t, time.Now().After(deadline), "nothing waited on backend %d", pid)
		time.Sleep(5 * time.Millisecond) // polling interval, bounded above
	}
}
