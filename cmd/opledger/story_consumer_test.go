package main

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// The service downstream of the story: inbox/example, the consumer that
// keeps refunds_issued from the operation feed (GET /v1/feed, a subscriber
// token) with the inbox and an UPSERT, run as a process of its own on a
// schema of its own.

// consumerBinary builds inbox/example once per test run.
func consumerBinary(t *testing.T) string {
	return buildOnce(t, "opledger/inbox/example", "refunds-issued")
}

// feedConsumer is the running consumer process and its schema.
type feedConsumer struct {
	t      *testing.T
	s      *system
	schema string
	pool   *pgxpool.Pool
	cmd    *exec.Cmd
	log    string
}

// startFeedConsumer starts the consumer on s's feed, in a schema of its own.
func (s *system) startFeedConsumer(t *testing.T) *feedConsumer {
	t.Helper()
	url, schema := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	c := &feedConsumer{t: t, s: s, schema: schema, pool: pool, log: filepath.Join(t.TempDir(), "refunds-issued.log")}
	c.start()
	return c
}

func (c *feedConsumer) start() {
	c.t.Helper()
	cmd := exec.Command(consumerBinary(c.t), "--feed-url", "http://"+c.s.api, "--token", subscriberToken, "--schema", c.schema)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+pgtest.URL())
	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	require.NoError(c.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(c.t, cmd.Start())
	c.cmd = cmd
	c.t.Cleanup(func() {
		c.kill()
		if c.t.Failed() {
			b, _ := os.ReadFile(c.log)
			c.t.Logf("refunds-issued log:\n%s", tail(string(b), 4000))
		}
	})
}

// kill stops the process at once, as a crash would.
func (c *feedConsumer) kill() {
	if c.cmd != nil {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
		c.cmd = nil
	}
}

// refunds reads refunds_issued: the rows of op, and all rows.
func (c *feedConsumer) refunds(op string) (ofOp, all int) {
	c.t.Helper()
	err := c.pool.QueryRow(c.t.Context(), `SELECT count(*) FILTER (WHERE operation_id = $1), count(*) FROM `+
		pgx.Identifier{c.schema, "refunds_issued"}.Sanitize(), op).Scan(&ofOp, &all)
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "42P01" {
		return 0, 0 // not migrated yet
	}
	require.NoError(c.t, err)
	return ofOp, all
}

// position is where the consumer stands in the feed ("" : nowhere yet).
func (c *feedConsumer) position() string {
	c.t.Helper()
	var p string
	err := c.pool.QueryRow(c.t.Context(), `SELECT position FROM `+pgx.Identifier{c.schema, "feed_position"}.Sanitize()).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(c.t, err)
	return p
}

// requireOneRefund waits until the consumer shows op's refund and requires
// that it is the table's one row.
func (c *feedConsumer) requireOneRefund(op string) {
	c.t.Helper()
	require.Eventually(c.t, func() bool { n, _ := c.refunds(op); return n > 0 }, clientWaitBound, 20*time.Millisecond,
		"the consumer never showed the refund")
	ofOp, all := c.refunds(op)
	require.Equal(c.t, 1, ofOp, "one row for the refund")
	require.Equal(c.t, 1, all, "and no other")
}

// feedEnd reads the whole feed as the subscriber and returns its last
// next: the end of the log as the feed reads it now.
func (c *feedConsumer) feedEnd() string {
	c.t.Helper()
	next := ""
	for range 1000 { // bound: a story's log is a few pages
		r := c.s.call("GET", "/v1/feed?limit=1000&after="+url.QueryEscape(next), subscriberToken, nil)
		require.Equal(c.t, 200, r.status, r.body)
		next, _ = r.body["next"].(string)
		if more, _ := r.body["more"].(bool); !more {
			return next
		}
	}
	c.t.Fatal("the feed did not end")
	return ""
}

// waitAt waits until the consumer's position is at end or past it.
func (c *feedConsumer) waitAt(end string) {
	c.t.Helper()
	want, err := postgres.ParsePosition(end)
	require.NoError(c.t, err)
	require.Eventually(c.t, func() bool {
		p := c.position()
		if p == "" {
			return false
		}
		at, err := postgres.ParsePosition(p)
		return err == nil && at.Compare(want) >= 0
	}, clientWaitBound, 20*time.Millisecond, "the consumer did not read the feed up to %s", end)
}

// handledIDs counts the event ids in the consumer's inbox.
func (c *feedConsumer) handledIDs() int {
	c.t.Helper()
	var n int
	require.NoError(c.t, c.pool.QueryRow(c.t.Context(), `SELECT count(*) FROM `+pgx.Identifier{c.schema, "inbox"}.Sanitize()).Scan(&n))
	return n
}

// rewind waits until the consumer has read the whole feed, kills it, moves
// its position back to the start of the feed (a backup restored, say),
// starts it again and waits until it has read it all again: every entry
// delivered a second time, each a Duplicate.
func (c *feedConsumer) rewind() {
	c.t.Helper()
	end := c.feedEnd()
	c.waitAt(end)
	c.kill()
	handled := c.handledIDs()
	require.Positive(c.t, handled)
	_, err := c.pool.Exec(c.t.Context(), `DELETE FROM `+pgx.Identifier{c.schema, "feed_position"}.Sanitize())
	require.NoError(c.t, err)
	c.start()
	c.waitAt(end)
	require.Equal(c.t, handled, c.handledIDs(), "every entry read again was a Duplicate: no new id in the inbox")
}
