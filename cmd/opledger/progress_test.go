package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// `opledger dlq resubmit` on a terminal resubmits one dead letter at a time
// with a progress line, selecting what the piped command selects.
func TestDLQResubmitProgress(t *testing.T) {
	t.Setenv("KAFKA_BROKERS", "")
	url, schema := pgtest.Schema(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = pgstate.Migrate(ctx, pool, schema)
	require.NoError(t, err)
	q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: schema, WorkerID: "w1"})
	require.NoError(t, err)
	for i := range 3 {
		msg := fmt.Sprintf("MSG-%d", i)
		value, err := transport.RefundRequest{MessageID: "MSG-1", OperationID: "OP-4471", CapabilityID: "CAP-91F"}.Encode()
		require.NoError(t, err)
		require.NoError(t, q.Publish(ctx, []transport.Outbound{{Topic: transport.TopicRefundRequests, Key: "OP-4471", MessageID: msg, Value: value}}))
		claimed, err := q.Claim(ctx, "w1", 1)
		require.NoError(t, err)
		require.NoError(t, q.Settle(ctx, claimed[0], transport.Disposition{Action: transport.ActionDeadLetter, Reason: "operation.unknown", Detail: "no such operation"}))
	}
	var stdout bytes.Buffer
	var term termBuffer
	code := run(context.WithoutCancel(ctx), []string{"dlq", "resubmit", "--all", "--operator", "ops-1", "--database-url", url, "--transport-schema", schema}, &stdout, &term)
	require.Equal(t, 0, code, term.String())
	require.Contains(t, stdout.String(), "3 resubmitted")
	for _, id := range []string{"DL-1", "DL-2", "DL-3"} {
		require.Contains(t, stdout.String(), id+" resubmitted as "+string(transport.ResubmissionMessageID(id)))
	}
	require.Contains(t, term.String(), "3 dead letters resubmitted")
	require.Contains(t, term.String(), "100%")
	dead, err := q.ListDeadLetters(ctx, 10)
	require.NoError(t, err)
	for _, dl := range dead {
		require.NotNil(t, dl.Resubmitted, dl.ID)
		require.Equal(t, "ops-1", dl.Resubmitted.By)
	}
	stdout.Reset()
	term.Reset()
	code = run(context.WithoutCancel(ctx), []string{"dlq", "resubmit", "--all", "--operator", "ops-1", "--database-url", url, "--transport-schema", schema}, &stdout, &term)
	require.Equal(t, 0, code, term.String())
	require.Contains(t, stdout.String(), "0 resubmitted", "nothing left to resubmit")
}

// `opledger projections rebuild` draws progress on a terminal, none piped.
func TestRebuildProgress(t *testing.T) {
	url, storeSchema := pgtest.Schema(t)
	store := pgtest.OpenMigrated(t, url, storeSchema)
	w, err := harness.New(harness.Options{Store: store, ClientAttempts: 1})
	require.NoError(t, err)
	defer w.Close()
	_, err = harness.RunStory(t.Context(), w, io.Discard, nil)
	require.NoError(t, err)
	_, live := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	_, err = projections.Migrate(t.Context(), pool, live)
	require.NoError(t, err)
	rebuild := func(stderr io.Writer, target string) (int, string) {
		var stdout bytes.Buffer
		code := run(context.WithoutCancel(t.Context()), []string{"projections", "rebuild", "--database-url", url, "--store-schema", storeSchema,
			"--live-schema", live, "--as-of", "2030-01-01T00:00:00Z", "--schema", target}, &stdout, stderr)
		return code, stdout.String()
	}
	var term termBuffer
	code, out := rebuild(&term, live+"_t")
	require.Equal(t, 0, code, term.String())
	require.Contains(t, out, "built an as-of view")
	require.Contains(t, term.String(), "events folded")
	require.Contains(t, term.String(), "done in")
	var piped bytes.Buffer
	code, _ = rebuild(&piped, live+"_p")
	require.Equal(t, 0, code, piped.String())
	require.False(t, strings.Contains(piped.String(), "events folded"), "piped: no progress")
	_, err = pool.Exec(t.Context(), `DROP SCHEMA "`+live+`_t" CASCADE; DROP SCHEMA "`+live+`_p" CASCADE`)
	require.NoError(t, err)
}

// The progress wrapper keeps exactly the optional interfaces of the store it
// wraps: verify's chain check and the rebuild find what they look for.
func TestProgressStoreKeepsInterfaces(t *testing.T) {
	store := pgtest.OpenStore(t)
	var term termBuffer
	wrapped := withProgress(t.Context(), store, newProgress(&term, "events"), nil)
	_, hasHead := wrapped.(eventstore.Header)
	_, hasHeads := wrapped.(eventstore.HeadReader)
	require.True(t, hasHead)
	require.True(t, hasHeads)
	mem := memory.New(nil)
	wrapped = withProgress(t.Context(), mem, newProgress(&term, "events"), nil)
	_, hasHead = wrapped.(eventstore.Header)
	_, memHeads := eventstore.Store(mem).(eventstore.HeadReader)
	_, hasHeads = wrapped.(eventstore.HeadReader)
	require.False(t, hasHead)
	require.Equal(t, memHeads, hasHeads)
}
