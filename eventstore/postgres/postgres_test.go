package postgres_test

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
	"opledger/eventstore/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t,
		func(t *testing.T) eventstore.Store { return pgtest.OpenStore(t) },
		// Racing goroutines each get a store with a pool of its own.
		storetest.WithReopen(func(t *testing.T, s eventstore.Store) eventstore.Store {
			return pgtest.OpenMigrated(t, pgtest.URL(), s.(*postgres.Store).Schema())
		}),
		storetest.WithHoldOpenAppend(func(ctx context.Context, s eventstore.Store, stream string, events []eventstore.EventData) (func() error, error) {
			return s.(*postgres.Store).HoldOpenAppend(ctx, stream, eventstore.Any(), events)
		}),
		storetest.WithOutage(storetest.Outage{
			Name: "server-gone",
			Start: func(t *testing.T) (eventstore.Store, func()) {
				url, schema := pgtest.Schema(t)
				pgtest.OpenMigrated(t, url, schema).Close() // migrate directly
				proxy := startProxy(t, serverAddr(t, url))
				return pgtest.OpenMigrated(t, redirect(t, url, proxy.Addr()), schema), proxy.Close
			},
			WorksBefore: true,
		}),
		storetest.WithOutage(storetest.Outage{
			Name: "closed-port",
			Start: func(t *testing.T) (eventstore.Store, func()) {
				// Open would refuse an unreachable server, so build the store
				// on a lazily connecting pool, as a caller owning its pool may.
				cfg, err := pgxpool.ParseConfig(redirect(t, pgtest.URL(), closedPort(t)))
				require.NoError(t, err)
				pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
				require.NoError(t, err)
				t.Cleanup(pool.Close)
				s, err := postgres.New(pool, "")
				require.NoError(t, err)
				return s, func() {}
			},
		}),
	)
}

// serverAddr returns host:port of the server url names.
func serverAddr(t *testing.T, connString string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(connString)
	require.NoError(t, err)
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// redirect returns connString pointed at addr (host:port) instead.
func redirect(t *testing.T, connString, addr string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		u.Host = addr
		return u.String()
	}
	return connString + " host=" + host + " port=" + port // later keys win
}

// withParam returns connString with a run-time parameter added.
func withParam(t *testing.T, connString, key, value string) string {
	t.Helper()
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return connString + " " + key + "=" + value
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// within runs call and returns its error, failing the test if it does not
// return within bound: a broken timeout must fail the test, not hang it.
func within(t *testing.T, bound time.Duration, call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatalf("call did not return within %s", bound)
		return nil
	}
}
