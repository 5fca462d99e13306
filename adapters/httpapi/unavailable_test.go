package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/domain/ledger"
	"opledger/eventstore/postgres/pgtest"
)

// TestStoreUnreachable: with the event store gone, every command is 503
// store.unavailable with Retry-After, a claim is never reported as Claimed,
// and nothing was recorded: the capability is still unused when the store
// comes back.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	op := e.create("down-1")
	_, token := e.allow(op)
	before := e.streamVersion(op)

	// A second server whose store lost its database mid-life.
	down := pgtest.OpenMigrated(t, pgtest.URL(), e.store.Schema())
	down.Close()
	h, err := ledger.New(ledger.Config{Store: down, Clock: e.clock, AppendRetryBackoff: time.Millisecond})
	require.NoError(t, err)
	api, err := httpapi.New(httpapi.Config{
		Ledger: h, Signer: e.signer, Tokens: e.tokens, ReadModels: e.pool, Schema: e.schema,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	healthy := e.srv
	e.srv = srv

	r := e.must(http.StatusServiceUnavailable, e.claim(op, "MSG-DOWN", token))
	require.Equal(t, httpapi.CodeStoreUnavailable, r.code())
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.NotContains(t, string(r.raw), "Claimed")

	r = e.must(http.StatusServiceUnavailable, e.claim(op, "MSG-DOWN", "forged.token"))
	require.Equal(t, httpapi.CodeStoreUnavailable, r.code(), "evidence that cannot be recorded is not answered as recorded")
	r = e.must(http.StatusServiceUnavailable, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-D"), "Idempotency-Key", "down-2"))
	require.Equal(t, httpapi.CodeStoreUnavailable, r.code())
	r = e.must(http.StatusServiceUnavailable, e.call(httpapi.RoleAuditor, "GET", "/v1/operations/"+string(op)+"/events", nil))
	require.Equal(t, httpapi.CodeStoreUnavailable, r.code())

	// Back on the healthy store: nothing happened, and the capability claims.
	e.srv = healthy
	require.Equal(t, before, e.streamVersion(op))
	require.Empty(t, e.streamTypes(e.unattributed()))
	r = e.must(http.StatusOK, e.claim(op, "MSG-DOWN", token))
	require.Equal(t, "Claimed", r.str("status"))
}
