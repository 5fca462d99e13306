package inbox_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
	"opledger/inbox"
	"opledger/inbox/inboxtest"
)

// The suite against a schema of this test's own, with a table name other
// than the default.
func TestInbox(t *testing.T) {
	t.Parallel()
	url, schema := pgtest.Schema(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	inboxtest.Run(t, pool, inbox.Config{Schema: schema, Table: "handled_messages"})
}

func TestConfigRefused(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]inbox.Config{
		"no consumer":     {},
		"NUL in consumer": {Consumer: "a\x00"},
		"long table":      {Consumer: "c", Table: string(make([]byte, 64))},
		"short retention": {Consumer: "c", Retention: 59e9},
	} {
		_, err := inbox.New(cfg)
		require.Error(t, err, name)
	}
}
