package postgres_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// replicationAt opens a store on url (no schema needed: the probe reads
// settings and pg_stat_replication only) and asks it.
func replicationAt(t *testing.T, url string) eventstore.Replication {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, MaxConns: 1})
	require.NoError(t, err)
	defer s.Close()
	r, err := s.Replication(t.Context())
	require.NoError(t, err)
	return r
}

// A primary alone, PostgreSQL's default: a commit is acknowledged on its
// disk alone.
func TestReplicationAloneIsNotSynchronous(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t, pgtest.NoStandby)
	r := replicationAt(t, c.Primary.URL())
	require.False(t, r.Synchronous)
	require.Zero(t, r.SyncStandbys)
	require.Contains(t, r.Detail, "NOT synchronous: synchronous_standby_names is empty")
	require.Contains(t, r.Detail, "no standby in pg_stat_replication")
}

// A standby streaming asynchronously is there, and still not synchronous.
func TestReplicationAsyncStandbyIsNotSynchronous(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t, pgtest.AsyncStandby)
	r := replicationAt(t, c.URL())
	require.False(t, r.Synchronous)
	require.Zero(t, r.SyncStandbys)
	require.Contains(t, r.Detail, "synchronous_standby_names is empty")
	require.Contains(t, r.Detail, "1 standby(s) in pg_stat_replication ("+pgtest.StandbyName+" streaming async)")
}

// A synchronous standby makes writes synchronous, asked through the
// multi-host URL; a session that commits locally is not, whatever the
// server's standbys; a promoted standby that kept synchronous_standby_names
// has no standby of its own to wait for (its commits would hang).
func TestReplicationSyncStandby(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t, pgtest.SyncStandby)
	r := replicationAt(t, c.URL())
	require.True(t, r.Synchronous, r.Detail)
	require.Equal(t, 1, r.SyncStandbys)
	require.Contains(t, r.Detail, "synchronous: synchronous_commit=on, synchronous_standby_names='"+pgtest.StandbyName+"'")
	require.Contains(t, r.Detail, pgtest.StandbyName+" streaming sync")

	local := replicationAt(t, c.URL()+"&options=-c%20synchronous_commit%3Dlocal")
	require.False(t, local.Synchronous)
	require.Contains(t, local.Detail, "synchronous_commit=local does not wait for a standby")

	// Only the standby can see itself as one: the URL's read-write target
	// never lands there, a plain URL does.
	onStandby := replicationAt(t, c.Standby.URL())
	require.False(t, onStandby.Synchronous)
	require.Contains(t, onStandby.Detail, "the server is a standby itself")

	c.Primary.Stop()
	c.Standby.Promote()
	promoted := replicationAt(t, c.URL())
	require.False(t, promoted.Synchronous)
	require.Contains(t, promoted.Detail, "no standby is synchronous now")
}

// A role without pg_read_all_stats sees a walsender but not its state: the
// probe says so, and how to fix it, instead of claiming no standby.
func TestReplicationHiddenStandbys(t *testing.T) {
	t.Parallel()
	c := pgtest.StartCluster(t, pgtest.SyncStandby)
	ctx := context.WithoutCancel(t.Context())
	conn, err := pgx.Connect(ctx, c.Primary.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE ROLE ledger_app LOGIN")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	r := replicationAt(t, "postgres://ledger_app@127.0.0.1:"+strconv.Itoa(c.Primary.Port)+"/postgres?sslmode=disable")
	require.False(t, r.Synchronous)
	require.Contains(t, r.Detail, "1 standby(s) hidden from this role: GRANT pg_read_all_stats to it")
}
