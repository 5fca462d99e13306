package projections_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/projections"
)

// Two projectors on one schema: one applies, the other waits. When the
// leader's lock connection is killed, the other takes over from the
// checkpoint; nothing is applied twice and nothing is skipped.
func TestTakeoverWhenLeaderConnectionDies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	a := e.request("OP-A", 1_000)
	xa := a.execute("MSG-A")

	// The first retries the lock only hourly once it has lost it, so the
	// takeover is the second's, deterministically.
	first := e.projector(func(c *projections.Config) {
		c.ApplicationName = "projector-1"
		c.LockRetryInterval = time.Hour
		c.BatchSize = 2
	})
	e.start(first)
	waitFor(t, "the first projector to lead", func() bool { return first.Status().Leading })
	second := e.projector(func(c *projections.Config) { c.ApplicationName = "projector-2"; c.BatchSize = 2 })
	e.start(second)
	e.waitCaughtUp(e.schema)
	require.False(t, second.Status().Leading, "one leader at a time")
	require.Zero(t, second.Status().Batches)

	pid := first.Status().LockBackendPID
	require.NotZero(t, pid)
	var terminated bool
	require.NoError(t, e.pool.QueryRow(t.Context(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&terminated))
	require.True(t, terminated)
	waitFor(t, "the second projector to lead", func() bool { return second.Status().Leading })

	for i := range 5 {
		a.claim(fmt.Sprintf("MSG-A%d", i), "CAP-NONE") // new messages: refused, recorded
		a.claim("MSG-A", "CAP-NONE")                   // duplicates of the claim's message
	}
	a.record(xa, domain.Completed, "re_A")
	e.waitCaughtUp(e.schema)
	require.Positive(t, second.Status().Batches, "the second applied after the takeover")
	require.False(t, first.Status().Leading)

	e.requireDelivery("MSG-A", "OP-A", "Claimed", 6)
	e.requireRebuildEquals()
}

// When the leader stops, a waiting projector takes over.
func TestTakeoverWhenLeaderStops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	a := e.request("OP-A", 1_000)
	first := e.projector(nil)
	require.NoError(t, first.Start(t.Context()))
	waitFor(t, "the first projector to lead", func() bool { return first.Status().Leading })
	second := e.projector(nil)
	e.start(second)
	e.waitCaughtUp(e.schema)
	require.NoError(t, first.Stop())
	<-first.Done()

	a.execute("MSG-A")
	e.waitCaughtUp(e.schema)
	require.True(t, second.Status().Leading)
	require.Equal(t, int64(1), e.count(e.schema, `SELECT count(*) FROM %s.executions WHERE operation_id = 'OP-A'`))
}

// A projector killed after writing a batch's rows and before committing
// leaves nothing of the batch: the next run applies it once. The kill is a
// pg_terminate_backend of the batch's own session, from another connection,
// while its transaction is open.
func TestCrashBeforeCommitAppliesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	a := e.request("OP-A", 1_000)
	a.execute("MSG-A")
	for range 6 {
		a.claim("MSG-A", "CAP-NONE") // duplicates land in several batches
	}
	total := e.countEvents(domain.TypeOperationRequested, domain.TypeDecided, domain.TypeCapabilityIssued,
		domain.TypeClaimed, domain.TypeDeliveryDuplicated)

	crashes := 0
	kill := func(ctx context.Context, tx pgx.Tx) error {
		if crashes >= 2 {
			return nil
		}
		crashes++
		var pid int32
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		var ok bool
		if err := e.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok); err != nil || !ok {
			return errors.Join(errors.New("terminate failed"), err)
		}
		return nil
	}

	// A one-shot run stops at the crash: nothing of that batch is there.
	e.waitVisible()
	p := e.projector(func(c *projections.Config) { c.BatchSize = 3 })
	p.SetBeforeCommit(kill)
	_, err := p.CatchUp(t.Context())
	require.Error(t, err)
	require.Equal(t, int64(0), e.checkpoint(e.schema).EventsApplied)
	require.Zero(t, e.count(e.schema, `SELECT count(*) FROM %s.operations`))

	// A running projector retries past the second crash.
	r := e.projector(func(c *projections.Config) { c.BatchSize = 3 })
	r.SetBeforeCommit(kill)
	e.start(r)
	e.waitCaughtUp(e.schema)
	require.Equal(t, 2, crashes)
	require.Equal(t, total, e.checkpoint(e.schema).EventsApplied)
	e.requireDelivery("MSG-A", "OP-A", "Claimed", 7)
	e.requireRebuildEquals()
}

// requireRebuildEquals rebuilds the log into a side schema and requires the
// live read models to equal it row for row.
func (e *env) requireRebuildEquals() {
	e.t.Helper()
	e.waitVisible()
	side := "rb_" + fmt.Sprint(time.Now().UnixNano())
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		_, _ = e.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{side}.Sanitize()+` CASCADE`)
	})
	_, err := projections.Rebuild(e.t.Context(), e.pool, e.store, projections.RebuildOptions{Live: e.schema, Schema: side})
	require.NoError(e.t, err)
	e.requireSameRows(e.schema, side)
}
