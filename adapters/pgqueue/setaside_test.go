package pgqueue_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/domain/setaside"
	"opledger/domain/setaside/setasidetest"
	"opledger/eventstore/postgres/pgtest"
)

func TestSetAside(t *testing.T) {
	setasidetest.Run(t, func(t *testing.T) setaside.Store {
		url, schema := pgtest.Schema(t)
		pool, err := pgxpool.New(t.Context(), url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		_, err = pgqueue.Migrate(t.Context(), pool, schema)
		require.NoError(t, err)
		s, err := pgqueue.NewSetAside(pool, schema)
		require.NoError(t, err)
		return s
	})
}
