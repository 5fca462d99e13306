// Package setasidetest is the behaviour every setaside.Store must show. Each
// backend's tests call Run.
package setasidetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain/setaside"
)

// Run checks the store newStore returns (a fresh, empty one per call).
func Run(t *testing.T, newStore func(t *testing.T) setaside.Store) {
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	policy := setaside.Policy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: 3 * time.Second}
	fail := func(item string, at time.Time) setaside.Failure {
		return setaside.Failure{Role: setaside.RoleSweeper, Item: item, OperationID: "OP-1", Reason: "stream.corrupt", Detail: "bad", At: at}
	}

	t.Run("BackoffThenSetAside", func(t *testing.T) {
		t.Parallel()
		ctx, s := context.Background(), newStore(t)
		it, err := s.Fail(ctx, fail("EXE-1.1", t0), policy)
		require.NoError(t, err)
		require.Equal(t, 1, it.Attempts)
		require.False(t, it.SetAside)
		require.Equal(t, t0.Add(time.Second), it.RetryAt.UTC())
		require.True(t, it.Held(t0))
		require.False(t, it.Held(t0.Add(time.Second)))

		it, err = s.Fail(ctx, fail("EXE-1.1", t0.Add(time.Second)), policy)
		require.NoError(t, err)
		require.Equal(t, 2, it.Attempts)
		require.Equal(t, t0.Add(3*time.Second), it.RetryAt.UTC(), "second failure waits twice the backoff")

		it, err = s.Fail(ctx, fail("EXE-1.1", t0.Add(3*time.Second)), policy)
		require.NoError(t, err)
		require.Equal(t, 3, it.Attempts)
		require.True(t, it.SetAside, "the third failure reaches MaxAttempts")
		require.Equal(t, t0.Add(3*time.Second), it.SetAsideAt.UTC())
		require.Equal(t, t0, it.FirstFailedAt.UTC())
		require.True(t, it.Held(t0.Add(time.Hour)), "set aside is held however late")

		it, err = s.Fail(ctx, fail("EXE-1.1", t0.Add(time.Hour)), policy)
		require.NoError(t, err)
		require.True(t, it.SetAside)
		require.Equal(t, t0.Add(3*time.Second), it.SetAsideAt.UTC(), "set aside once, at the bound")
	})

	t.Run("HeldClearGet", func(t *testing.T) {
		t.Parallel()
		ctx, s := context.Background(), newStore(t)
		_, err := s.Fail(ctx, fail("EXE-2.1", t0), policy)
		require.NoError(t, err)
		held, err := s.Held(ctx, setaside.RoleSweeper, []string{"EXE-2.1", "EXE-2.2"}, t0)
		require.NoError(t, err)
		require.Contains(t, held, "EXE-2.1")
		require.NotContains(t, held, "EXE-2.2")
		held, err = s.Held(ctx, setaside.RoleReconciler, []string{"EXE-2.1"}, t0)
		require.NoError(t, err)
		require.Empty(t, held, "roles do not share items")
		held, err = s.Held(ctx, setaside.RoleSweeper, []string{"EXE-2.1"}, t0.Add(time.Second))
		require.NoError(t, err)
		require.Empty(t, held, "backoff over: may be tried")

		got, ok, err := s.Get(ctx, setaside.RoleSweeper, "EXE-2.1")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "stream.corrupt", got.Reason)
		require.Equal(t, "OP-1", string(got.OperationID))

		require.NoError(t, s.Clear(ctx, setaside.RoleSweeper, "EXE-2.1"))
		require.NoError(t, s.Clear(ctx, setaside.RoleSweeper, "never-failed"))
		_, ok, err = s.Get(ctx, setaside.RoleSweeper, "EXE-2.1")
		require.NoError(t, err)
		require.False(t, ok)
		it, err := s.Fail(ctx, fail("EXE-2.1", t0.Add(time.Minute)), policy)
		require.NoError(t, err)
		require.Equal(t, 1, it.Attempts, "cleared: counting starts again")
	})

	t.Run("ListPagesAndCounts", func(t *testing.T) {
		t.Parallel()
		ctx, s := context.Background(), newStore(t)
		for i := range 5 {
			f := fail(fmt.Sprintf("EXE-3.%d", i), t0.Add(time.Duration(i)*time.Second))
			for range policy.MaxAttempts - i%2*2 { // even items set aside, odd ones retrying
				_, err := s.Fail(ctx, f, policy)
				require.NoError(t, err)
			}
		}
		_, err := s.Fail(ctx, setaside.Failure{Role: setaside.RoleRelay, Item: "evt-1", Reason: "publish.failed", At: t0}, policy)
		require.NoError(t, err)

		var all []setaside.Item
		q := setaside.Query{Role: setaside.RoleSweeper, Limit: 2}
		for range 10 { // bounded: 5 items, pages of 2
			page, err := s.List(ctx, q)
			require.NoError(t, err)
			all = append(all, page...)
			if len(page) < q.Limit {
				break
			}
			q.After = &page[len(page)-1]
		}
		require.Len(t, all, 5)
		for i, it := range all {
			require.Equal(t, fmt.Sprintf("EXE-3.%d", i), it.Item, "oldest first failure first")
		}
		aside, err := s.List(ctx, setaside.Query{SetAsideOnly: true})
		require.NoError(t, err)
		require.Len(t, aside, 3)

		counts, err := s.Counts(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []setaside.Count{
			{Role: setaside.RoleRelay, Retrying: 1},
			{Role: setaside.RoleSweeper, SetAside: 3, Retrying: 2},
		}, counts)

		_, err = s.List(ctx, setaside.Query{Limit: setaside.MaxListLimit + 1})
		require.ErrorIs(t, err, setaside.ErrInvalid)
	})

	t.Run("HostileDetailKeptEscaped", func(t *testing.T) {
		t.Parallel()
		ctx, s := context.Background(), newStore(t)
		f := fail("EXE-4.1", t0)
		f.Detail = "bad\x00byte\n"
		it, err := s.Fail(ctx, f, policy)
		require.NoError(t, err)
		require.Equal(t, `bad\x00byte\n`, it.Detail)
		_, err = s.Fail(ctx, setaside.Failure{Role: setaside.RoleSweeper, At: t0, Reason: "x"}, policy)
		require.ErrorIs(t, err, setaside.ErrInvalid, "an item id is required")
	})
}
