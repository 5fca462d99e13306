package httpapi_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/domain/setaside"
	"opledger/eventstore/postgres/pgtest"
)

// The loops' failing items, from the PostgreSQL set-aside store the roles
// write: every role may list them; only an operator releases one, and a
// released item is forgotten (its loop tries it again).
func TestSetAsideListAndRelease(t *testing.T) {
	t.Parallel()
	var store *pgsetaside.Store
	e := newEnv(t, func(c *httpapi.Config) {
		url, schema := pgtest.Schema(t)
		pool := openPool(t, url)
		_, err := pgstate.Migrate(t.Context(), pool, schema)
		require.NoError(t, err)
		store, err = pgsetaside.New(pool, schema)
		require.NoError(t, err)
		c.SetAside = store
	})
	policy := setaside.Policy{MaxAttempts: 2, Backoff: time.Second, MaxBackoff: time.Second}
	fail := func(role setaside.Role, item, detail string, at time.Time) {
		_, err := store.Fail(t.Context(), setaside.Failure{Role: role, Item: item, OperationID: "OP-4471", Reason: "stream.corrupt", Detail: detail, At: at}, policy)
		require.NoError(t, err)
	}
	fail(setaside.RoleSweeper, "EXE-4471.1", "corrupt \x00 stream", start)
	fail(setaside.RoleSweeper, "EXE-4471.1", "corrupt \x00 stream", start.Add(time.Second)) // set aside
	fail(setaside.RoleReconciler, "EXE-4472.1", "contention", start.Add(2*time.Second))     // retrying

	list := func(role httpapi.Role, query string) response {
		return e.call(role, "GET", "/v1/set-aside"+query, nil)
	}
	items := func(r response) []map[string]any {
		raw, _ := r.body["items"].([]any)
		out := make([]map[string]any, len(raw))
		for i, v := range raw {
			out[i], _ = v.(map[string]any)
		}
		return out
	}
	for _, role := range httpapi.Readers {
		if tokenOf[role] == "" {
			continue // the analyst: analyst_test.go has its own token file
		}
		all := items(e.must(http.StatusOK, list(role, "")))
		require.Len(t, all, 2, role)
	}
	all := items(e.must(http.StatusOK, list(httpapi.RoleAuditor, "")))
	require.Equal(t, "sweeper", all[0]["role"])
	require.Equal(t, "EXE-4471.1", all[0]["item"])
	require.Equal(t, true, all[0]["set_aside"])
	require.EqualValues(t, 2, all[0]["attempts"])
	require.Equal(t, `corrupt \x00 stream`, all[0]["detail"], "hostile text is kept escaped")
	require.Nil(t, all[0]["retry_at"])
	require.NotNil(t, all[0]["set_aside_at"])
	require.Equal(t, false, all[1]["set_aside"])
	require.NotNil(t, all[1]["retry_at"])

	only := items(e.must(http.StatusOK, list(httpapi.RoleAuditor, "?set_aside_only=true")))
	require.Len(t, only, 1)
	require.Equal(t, "EXE-4471.1", only[0]["item"])
	byRole := items(e.must(http.StatusOK, list(httpapi.RoleAuditor, "?role=reconciler")))
	require.Len(t, byRole, 1)
	require.Equal(t, "EXE-4472.1", byRole[0]["item"])

	page := e.must(http.StatusOK, list(httpapi.RoleAuditor, "?limit=1"))
	require.Len(t, items(page), 1)
	next := page.str("next_after")
	require.NotEmpty(t, next)
	page = e.must(http.StatusOK, list(httpapi.RoleAuditor, "?limit=1&after="+url.QueryEscape(next)))
	require.Len(t, items(page), 1)
	require.Equal(t, "EXE-4472.1", items(page)[0]["item"])

	for query, field := range map[string]string{
		"?role=janitor": "role", "?set_aside_only=yes": "set_aside_only", "?after=bm9wZQ": "after", "?limit=0": "limit",
	} {
		r := e.must(http.StatusBadRequest, list(httpapi.RoleAuditor, query))
		require.Equal(t, field, r.field(), query)
	}

	release := func(role httpapi.Role, body any) response {
		return e.call(role, "POST", "/v1/set-aside/release", body)
	}
	body := map[string]any{"role": "sweeper", "item": "EXE-4471.1"}
	for _, role := range []httpapi.Role{httpapi.RoleAgent, httpapi.RoleWorker, httpapi.RoleAuditor} {
		e.must(http.StatusForbidden, release(role, body))
	}
	require.Equal(t, "item", e.must(http.StatusBadRequest, release(httpapi.RoleOperator, map[string]any{"role": "sweeper"})).field())
	require.Equal(t, "role", e.must(http.StatusBadRequest, release(httpapi.RoleOperator, map[string]any{"role": "janitor", "item": "x"})).field())
	require.Equal(t, "item", e.must(http.StatusBadRequest, release(httpapi.RoleOperator, map[string]any{"role": "sweeper", "item": "EXE\u0000"})).field())
	e.must(http.StatusBadRequest, release(httpapi.RoleOperator, map[string]any{"role": "sweeper", "item": "EXE-4471.1", "force": true}))
	require.Equal(t, httpapi.CodeSetAsideUnknown, e.must(http.StatusNotFound, release(httpapi.RoleOperator, map[string]any{"role": "reconciler", "item": "EXE-4471.1"})).code())
	_, found, err := store.Get(t.Context(), setaside.RoleSweeper, "EXE-4471.1")
	require.NoError(t, err)
	require.True(t, found, "refused releases changed nothing")

	r := e.must(http.StatusOK, release(httpapi.RoleOperator, body))
	released, _ := r.body["released"].(map[string]any)
	require.Equal(t, "EXE-4471.1", released["item"])
	require.NotEmpty(t, r.str("note"))
	_, found, err = store.Get(t.Context(), setaside.RoleSweeper, "EXE-4471.1")
	require.NoError(t, err)
	require.False(t, found, "released: forgotten")
	require.Equal(t, httpapi.CodeSetAsideUnknown, e.must(http.StatusNotFound, release(httpapi.RoleOperator, body)).code())
	require.Len(t, items(e.must(http.StatusOK, list(httpapi.RoleAuditor, ""))), 1)
}
