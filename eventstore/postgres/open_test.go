package postgres_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

func TestRedactURLHidesPasswords(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"postgres://alice:s3cret@db:5432/app?sslmode=disable":     "postgres://alice:xxxxx@db:5432/app?sslmode=disable",
		"postgresql://alice@db/app":                               "postgresql://alice@db/app",
		"postgres://db/app?user=alice&password=s3cret":            "postgres://db/app?password=xxxxx&user=alice",
		"host=db user=alice password=s3cret dbname=app":           "host=db user=alice password=xxxxx dbname=app",
		"host=db password = 's3 cret\\' x' dbname=app":            "host=db password = xxxxx dbname=app",
		"postgres://alice:s3cret@db:5432/app%zz":                  "postgres://alice:xxxxx@db:5432/app%zz",
		"postgres://alice:s3cret@[::1:5432/app":                   "postgres://alice:xxxxx@[::1:5432/app",
		"postgres://alice:s3cret@db/app?sslmode=disable&password": "postgres://alice:xxxxx@db/app?password=xxxxx&sslmode=disable",
	}
	for in, want := range cases {
		got := postgres.RedactURL(in)
		require.Equal(t, want, got, "RedactURL(%q)", in)
		require.NotContains(t, got, "s3")
	}
}

func TestOpenValidatesConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for name, cfg := range map[string]postgres.Config{
		"no URL":            {},
		"negative MaxConns": {URL: pgtest.URL(), MaxConns: -1},
		"schema too long":   {URL: pgtest.URL(), Schema: strings.Repeat("s", 64)},
		"negative timeout":  {URL: pgtest.URL(), ConnectTimeout: -1},
	} {
		_, err := postgres.Open(ctx, cfg)
		require.Error(t, err, name)
		require.NotErrorIs(t, err, eventstore.ErrUnavailable, name)
	}
	_, err := postgres.Open(ctx, postgres.Config{URL: "postgres://alice:s3cret@db:notaport/app"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret", "a bad URL is reported without its password")
}

// TestOpenUnreachable: a closed port and a server that accepts connections
// but never answers both fail Open fast, as unavailable, without printing
// the password.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	t.Run("closed port", func(t *testing.T) {
		t.Parallel()
		connString := "postgres://alice:s3cret@" + closedPort(t) + "/app?sslmode=disable"
		err := within(t, 10*time.Second, func(ctx context.Context) error {
			_, err := postgres.Open(ctx, postgres.Config{URL: connString})
			return err
		})
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
		require.NotContains(t, err.Error(), "s3cret")
	})
	t.Run("silent server", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { ln.Close() })
		accepted := make(chan net.Conn, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- c // hold it open, say nothing
			}
		}()
		t.Cleanup(func() {
			for {
				select {
				case c := <-accepted:
					c.Close()
				default:
					return
				}
			}
		})
		connString := "postgres://alice:s3cret@" + ln.Addr().String() + "/app?sslmode=disable"
		// No deadline on the context: only the connect timeout can end it.
		err = within(t, 10*time.Second, func(ctx context.Context) error {
			_, err := postgres.Open(ctx, postgres.Config{URL: connString, ConnectTimeout: 200 * time.Millisecond})
			return err
		})
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
		require.NotContains(t, err.Error(), "s3cret")
	})
}

// TestClosedStoreUnavailable: calls after Close report ErrUnavailable.
func TestClosedStoreUnavailable(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, schema)
	store.Close()
	_, err := store.Append(t.Context(), "s", eventstore.Any(), []eventstore.EventData{{ID: "0b5e2d1c-4a3f-4e8e-9a57-1f2d3c4b5a69", Type: "T"}})
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	_, err = store.ReadAll(t.Context(), nil, 10)
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
}

// TestServerTerminatesConnection: a connection the server ends in the middle
// of an append (pg_terminate_backend: SQLSTATE 57P01) surfaces as
// ErrUnavailable, the append wrote nothing, and the store recovers.
func TestServerTerminatesConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url, schema := pgtest.Schema(t)
	holder := pgtest.OpenMigrated(t, url, schema)
	app := fmt.Sprintf("pgtest_terminate_%d", time.Now().UnixNano())
	victim := pgtest.OpenMigrated(t, withParam(t, url, "application_name", app), schema)
	stream := "operation-OP-1"

	// Hold the stream's row so the victim's append blocks on it, in the
	// middle of its statement.
	commit, err := holder.HoldOpenAppend(ctx, stream, eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = commit() })
	appended := make(chan error, 1)
	go func() {
		_, err := victim.Append(ctx, stream, eventstore.Any(), newEvents(1))
		appended <- err
	}()

	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer admin.Close(context.WithoutCancel(ctx))
	terminated := false
	for range 1000 { // bounded poll: the append reaches its lock wait in milliseconds
		var n int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		require.NoError(t, err)
		if n > 0 {
			terminated = true
			break
		}
		select {
		case err := <-appended:
			t.Fatalf("append finished before it could be interrupted: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	require.True(t, terminated, "the victim's append never waited on the lock")

	select {
	case err := <-appended:
		require.ErrorIs(t, err, eventstore.ErrUnavailable)
	case <-time.After(15 * time.Second):
		t.Fatal("append did not return after its connection was terminated")
	}
	require.NoError(t, commit())

	got, err := victim.ReadStream(ctx, stream, 0, 10)
	require.NoError(t, err, "the store reconnects")
	require.Len(t, got, 1, "the interrupted append wrote nothing")
}

// TestCustomSchemaName: any schema name works, quoted, and tables land only
// there.
func TestCustomSchemaName(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := pgtest.URL()
	schema := fmt.Sprintf(`pgtest_We"ird; Schema %d`, time.Now().UnixNano())
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		require.NoError(t, err)
		admin.Close(ctx)
	})
	applied, err := postgres.Migrate(ctx, admin, schema)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3}, applied)
	store := pgtest.OpenMigrated(t, url, schema)
	require.NoError(t, store.CheckSchema(ctx))
	_, err = store.Append(ctx, "s", eventstore.NoStream(), newEvents(2))
	require.NoError(t, err)
	var n int
	require.NoError(t, admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "events"}.Sanitize()).Scan(&n))
	require.Equal(t, 2, n)
}

// TestAppendRefusesWhatPostgresCannotStore: ids that are not lowercase UUIDs
// and data that is not JSON (or that jsonb cannot hold) are invalid appends.
func TestAppendRefusesWhatPostgresCannotStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := pgtest.OpenStore(t)
	valid := newEvents(1)[0]
	for name, e := range map[string]eventstore.EventData{
		"id not a UUID":     {ID: "evt-1", Type: "T"},
		"uppercase UUID":    {ID: strings.ToUpper(valid.ID), Type: "T"},
		"data not JSON":     {ID: valid.ID, Type: "T", Data: []byte("{")},
		"metadata not JSON": {ID: valid.ID, Type: "T", Metadata: []byte("nope")},
		"NUL in jsonb":      {ID: valid.ID, Type: "T", Data: []byte(`{"a":"\u0000"}`)},
	} {
		_, err := store.Append(ctx, "s", eventstore.Any(), []eventstore.EventData{e})
		require.ErrorIs(t, err, eventstore.ErrInvalidAppend, name)
	}
	got, err := store.ReadStream(ctx, "s", 0, 10)
	require.NoError(t, err)
	require.Empty(t, got)
}

// TestHead: Head is the last position ReadAll can return, and does not pass
// an open append.
func TestHead(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := pgtest.OpenStore(t)
	head, err := store.Head(ctx)
	require.NoError(t, err)
	require.Zero(t, head.Compare(nil), "empty log")

	_, err = store.Append(ctx, "a", eventstore.NoStream(), newEvents(3))
	require.NoError(t, err)
	all := waitVisible(t, store, 3)
	head, err = store.Head(ctx)
	require.NoError(t, err)
	require.Zero(t, head.Compare(all[2].Position), "head is the last visible event")

	commit, err := store.HoldOpenAppend(ctx, "b", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = commit() })
	_, err = store.Append(ctx, "c", eventstore.NoStream(), newEvents(1))
	require.NoError(t, err)
	head, err = store.Head(ctx)
	require.NoError(t, err)
	require.Zero(t, head.Compare(all[2].Position), "head does not pass an open append")
	require.NoError(t, commit())
	all = waitVisible(t, store, 5)
	head, err = store.Head(ctx)
	require.NoError(t, err)
	require.Zero(t, head.Compare(all[4].Position))
}

// waitVisible polls ReadAll, with a bound, until n events are visible (an
// open transaction elsewhere on the server may hold readers back).
func waitVisible(t *testing.T, store *postgres.Store, n int) []eventstore.RecordedEvent {
	t.Helper()
	for range 3000 { // about 30 s
		all, err := store.ReadAll(t.Context(), nil, n+1)
		require.NoError(t, err)
		if len(all) >= n {
			return all
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d events never became visible", n)
	return nil
}

func newEvents(n int) []eventstore.EventData {
	out := make([]eventstore.EventData, n)
	for i := range out {
		out[i] = eventstore.EventData{ID: uuid.NewString(), Type: "Tested", Data: []byte(`{}`)}
	}
	return out
}
