package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// `opledger regressions`: list shows what a process recorded; ack needs
// an operator's token from the tokens file, records the token's name as
// the operator, and the list is then clear.
func TestRegressionsCommands(t *testing.T) {
	url, schema := pgtest.Schema(t)
	ctx := t.Context()
	store := pgtest.OpenMigrated(t, url, schema)
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: store, Noticer: "worker-3", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rec.ObserveRegression(ctx, eventstore.Regression{Cache: domain.CacheWorker, Stream: "operation-OP-9", SeenVersion: 4, SeenEventID: "ev-4",
		HeldVersion: 2, Context: []domain.SeenExecution{{ExecutionID: "EXE-9.1", IdempotencyKey: "refund-OP-9-a1", State: domain.ExecCompleted, ProviderReference: "re_9"}}})

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("operator operator-token-0123456789 olga\nauditor auditor-token-0123456789 audrey\n"), 0o600))
	n := 0
	tokenFile := func(token string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("token-%d", n))
		require.NoError(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
		return p
	}
	cli := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.WithoutCancel(ctx), append(append([]string{"regressions"}, args...), "--database-url", url, "--store-schema", schema), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := cli("list")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "worker-3")
	require.Contains(t, out, "operation-OP-9")
	require.Contains(t, out, "EXE-9.1 Completed refund-OP-9-a1 ref re_9")
	require.Contains(t, out, "1 log regressions unacknowledged")

	code, _, errOut = cli("ack", "--tokens", tokens, "--token-file", tokenFile("operator-token-0123456789"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--note")
	code, _, errOut = cli("ack", "--note", "checked", "--tokens", tokens)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "token")
	code, _, errOut = cli("ack", "--note", "checked", "--tokens", tokens, "--token-file", tokenFile("auditor-token-0123456789"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "only an operator acknowledges")
	code, _, errOut = cli("ack", "--note", "checked", "--tokens", tokens, "--token-file", tokenFile("not-a-known-token-000"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is not in")
	require.NotContains(t, errOut, "not-a-known-token-000", "a token is never printed")

	code, out, errOut = cli("ack", "--note", "worker-3's refund re_9 checked at the provider", "--tokens", tokens,
		"--token-file", tokenFile("operator-token-0123456789"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "acknowledged 1 log regressions")
	require.Contains(t, out, "as olga")
	code, out, _ = cli("list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "no log regression is unacknowledged")
	require.Contains(t, out, "last acknowledged by olga")
	code, out, _ = cli("ack", "--note", "again", "--tokens", tokens, "--token-file", tokenFile("operator-token-0123456789"))
	require.Equal(t, 0, code)
	require.Contains(t, out, "no log regression is unacknowledged")
}
