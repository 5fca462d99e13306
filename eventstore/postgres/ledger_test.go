package postgres_test

import (
	"testing"

	"opledger/domain/ledger/ledgertest"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
)

// TestLedgerOnPostgres runs the command handler's behaviour suite on real
// Postgres: racing handlers get stores with pools of their own, and the
// outage is a server that goes away under a connected store.
func TestLedgerOnPostgres(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, ledgertest.Backend{
		New: func(t *testing.T) (eventstore.Store, func() eventstore.Store) {
			s := pgtest.OpenStore(t)
			return s, func() eventstore.Store { return pgtest.OpenMigrated(t, pgtest.URL(), s.Schema()) }
		},
		Down: func(t *testing.T, primary eventstore.Store) (eventstore.Store, func()) {
			url := pgtest.URL()
			proxy := startProxy(t, serverAddr(t, url))
			down := pgtest.OpenMigrated(t, redirect(t, url, proxy.Addr()), primary.(*postgres.Store).Schema())
			proxy.Close() // the server is gone for this store, mid-life
			return down, nil
		},
		Shorten: func(t *testing.T, s eventstore.Store, stream string, keep int64) {
			pgtest.Shorten(t, pgtest.URL(), s.(*postgres.Store).Schema(), stream, keep)
		},
	})
}
