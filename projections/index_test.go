package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/projections"
)

// The Postgres index answers as recovery.LogIndex (the in-memory reference)
// does, over the same log, at every step of a history that moves executions
// through every state the roles care about.
func TestIndexAgreesWithLogIndex(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	e := newEnv(t, start)
	idx, err := projections.NewIndex(e.pool, e.schema)
	require.NoError(t, err)
	ref, err := recovery.NewLogIndex(recovery.LogIndexConfig{Store: e.store, SetAside: &setaside.Memory{}, Clock: e.clock})
	require.NoError(t, err)

	// check catches the projection up and compares both indexes at the
	// clock's now and around the lease expiries.
	check := func(step string) (expired, unknown []recovery.ExecutionRef) {
		t.Helper()
		e.catchUp()
		for _, limit := range []int{1, 2, 100} {
			for _, at := range []time.Duration{0, domain.DefaultLeaseDuration - time.Second, domain.DefaultLeaseDuration, time.Hour} {
				now := e.clock.Now().Add(at)
				want, err := ref.ExpiredLeases(t.Context(), now, recovery.Cursor{}, limit)
				require.NoError(t, err)
				got, err := idx.ExpiredLeases(t.Context(), now, recovery.Cursor{}, limit)
				require.NoError(t, err)
				requireSameRefs(t, want, got, "%s: expired leases at +%s, limit %d", step, at, limit)
				requireSamePages(t, limit, func(after recovery.Cursor, limit int) ([]recovery.ExecutionRef, []recovery.ExecutionRef) {
					want, err := ref.ExpiredLeases(t.Context(), now, after, limit)
					require.NoError(t, err)
					got, err := idx.ExpiredLeases(t.Context(), now, after, limit)
					require.NoError(t, err)
					return want, got
				}, "%s: expired leases at +%s, pages of %d", step, at, limit)
				if at == 0 && limit == 100 {
					expired = got
				}
			}
			want, err := ref.UnknownExecutions(t.Context(), recovery.Cursor{}, limit)
			require.NoError(t, err)
			got, err := idx.UnknownExecutions(t.Context(), recovery.Cursor{}, limit)
			require.NoError(t, err)
			requireSameRefs(t, want, got, "%s: unknown executions, limit %d", step, limit)
			requireSamePages(t, limit, func(after recovery.Cursor, limit int) ([]recovery.ExecutionRef, []recovery.ExecutionRef) {
				want, err := ref.UnknownExecutions(t.Context(), after, limit)
				require.NoError(t, err)
				got, err := idx.UnknownExecutions(t.Context(), after, limit)
				require.NoError(t, err)
				return want, got
			}, "%s: unknown executions, pages of %d", step, limit)
			if limit == 100 {
				unknown = got
			}
		}
		return expired, unknown
	}

	a, b, c, d := e.request("OP-A", 1_000), e.request("OP-B", 1_000), e.request("OP-C", 1_000), e.request("OP-D", 1_000)
	expired, unknown := check("nothing claimed")
	require.Empty(t, expired)
	require.Empty(t, unknown)

	xa, xb := a.execute("MSG-A"), b.execute("MSG-B") // same claim time: ordered by id
	e.clock.Advance(10 * time.Second)
	xc := c.execute("MSG-C")
	expired, _ = check("three executing, leases running")
	require.Empty(t, expired)

	e.clock.Advance(domain.DefaultLeaseDuration - 5*time.Second) // A and B expired, C not yet
	expired, _ = check("two leases expired")
	require.Len(t, expired, 2)

	b.renew(xb) // B renewed: no longer expired
	expired, _ = check("one renewed")
	require.Equal(t, []domain.ExecutionID{xa}, ids(expired))

	a.lapse(xa) // the sweeper's move: A is Unknown since now
	e.clock.Advance(time.Second)
	c.record(xc, domain.Unknown, "") // C ambiguous, a second later
	_, unknown = check("two unknown")
	require.Equal(t, []domain.ExecutionID{xa, xc}, ids(unknown))
	require.True(t, unknown[0].Since.Equal(e.clock.Now().Add(-time.Second)))

	c.escalate(xc) // a person's queue, not the reconciler's
	_, unknown = check("one escalated")
	require.Equal(t, []domain.ExecutionID{xa}, ids(unknown))
	escalated, err := idx.EscalatedExecutions(t.Context(), 10)
	require.NoError(t, err)
	require.Equal(t, []domain.ExecutionID{xc}, ids(escalated))

	a.late(xa, domain.Completed, "re_A") // the stale executor's evidence
	xd := d.execute("MSG-D")
	d.record(xd, domain.NotApplied, "")
	b.record(xb, domain.Completed, "re_B")
	e.clock.Advance(time.Hour)
	expired, unknown = check("all ended")
	require.Empty(t, expired)
	require.Empty(t, unknown)

	c.reconcile(xc, domain.NotApplied, "")
	check("escalation resolved")
	escalated, err = idx.EscalatedExecutions(t.Context(), 10)
	require.NoError(t, err)
	require.Empty(t, escalated)

	none, err := idx.UnknownExecutions(t.Context(), recovery.Cursor{}, 0)
	require.NoError(t, err)
	require.Empty(t, none)
}

// requireSamePages walks both indexes page by page with the keyset cursor
// until a page comes back short, and requires the same pages.
func requireSamePages(t *testing.T, limit int, page func(after recovery.Cursor, limit int) (want, got []recovery.ExecutionRef), format string, args ...any) {
	t.Helper()
	var after recovery.Cursor
	seen := map[domain.ExecutionID]bool{}
	for range 100 { // bounded: the histories here hold a handful of executions
		want, got := page(after, limit)
		requireSameRefs(t, want, got, format, args...)
		for _, r := range got {
			require.False(t, seen[r.ExecutionID], "%s listed twice while paging", r.ExecutionID)
			seen[r.ExecutionID] = true
		}
		if len(got) < limit {
			return
		}
		after = recovery.CursorOf(got[len(got)-1])
	}
	t.Fatalf("paging did not end")
}

func requireSameRefs(t *testing.T, want, got []recovery.ExecutionRef, format string, args ...any) {
	t.Helper()
	require.Len(t, got, len(want), append([]any{format}, args...)...)
	for i := range want {
		require.Equal(t, want[i].OperationID, got[i].OperationID, format, args)
		require.Equal(t, want[i].ExecutionID, got[i].ExecutionID, format, args)
		require.True(t, want[i].Since.Equal(got[i].Since), "%v: since %s vs %s", args, want[i].Since, got[i].Since)
	}
}

func ids(refs []recovery.ExecutionRef) []domain.ExecutionID {
	out := make([]domain.ExecutionID, len(refs))
	for i, r := range refs {
		out[i] = r.ExecutionID
	}
	return out
}
