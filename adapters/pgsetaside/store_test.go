package pgsetaside_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/domain/setaside"
	"opledger/domain/setaside/setasidetest"
	"opledger/eventstore/postgres/pgtest"
)

// The PostgreSQL set-aside store passes the setaside.Store contract.
func TestStore(t *testing.T) {
	setasidetest.Run(t, func(t *testing.T) setaside.Store {
		url, schema := pgtest.Schema(t)
		pool, err := pgxpool.New(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = pgstate.Migrate(t.Context(), pool, schema)
		require.NoError(t, err)
		s, err := pgsetaside.New(pool, schema)
		require.NoError(t, err)
		return s
	})
}
