package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgsetaside"
	"opledger/adapters/transport/pgstate"
	"opledger/domain/setaside"
	"opledger/eventstore/postgres/pgtest"
)

// `opledger set-aside`: list shows the set-aside items (--all the retried
// ones too, --role one loop's, --json one object per item); release
// forgets one, and refuses what names nothing.
func TestSetAsideCommands(t *testing.T) {
	url, schema := pgtest.Schema(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pgstate.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	store, err := pgsetaside.New(pool, schema)
	require.NoError(t, err)
	at := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	policy := setaside.Policy{MaxAttempts: 1}
	_, err = store.Fail(ctx, setaside.Failure{Role: setaside.RoleReconciler, Item: "EXE-4471.1", OperationID: "OP-4471",
		Reason: "stream.corrupt", Detail: "ledger: corrupt operation stream", At: at}, policy)
	require.NoError(t, err)
	_, err = store.Fail(ctx, setaside.Failure{Role: setaside.RoleSweeper, Item: "EXE-4472.1", Reason: "ledger.contention", Detail: "busy", At: at.Add(time.Second)},
		setaside.Policy{MaxAttempts: 3})
	require.NoError(t, err)

	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.WithoutCancel(ctx), append(append([]string{"set-aside"}, args...), "--database-url", url, "--transport-schema", schema), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cli("list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "EXE-4471.1")
	require.Contains(t, out, "stream.corrupt")
	require.NotContains(t, out, "EXE-4472.1", "still retried: only with --all")
	require.Contains(t, out, "1 set-aside items")

	code, out, _ = cli("list", "--all")
	require.Equal(t, 0, code)
	require.Contains(t, out, "EXE-4472.1")
	require.Contains(t, out, "retry at")
	code, out, _ = cli("list", "--all", "--role", "sweeper", "--json")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1)
	var item map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &item))
	require.Equal(t, "EXE-4472.1", item["item"])
	require.Equal(t, false, item["set_aside"])

	code, _, errOut = cli("list", "--role", "janitor")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--role")
	code, _, errOut = cli("release", "reconciler")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "ROLE ITEM")
	code, _, errOut = cli("release", "sweeper", "EXE-4471.1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no failing item")

	code, out, errOut = cli("release", "reconciler", "EXE-4471.1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "released reconciler EXE-4471.1")
	_, found, err := store.Get(ctx, setaside.RoleReconciler, "EXE-4471.1")
	require.NoError(t, err)
	require.False(t, found)
	code, out, _ = cli("list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 set-aside items")
}
