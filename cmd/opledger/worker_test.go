package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/eventstore/postgres/pgtest"
)

// A missing or malformed setting stops the worker with a line naming it.
func TestWorkerRefusesBadSettings(t *testing.T) {
	t.Setenv("PROVIDER_URL", "")
	t.Setenv("KAFKA_BROKERS", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker"}, "PROVIDER_URL"},
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--kafka-brokers", "nohost"}, "--kafka-brokers"},
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--provider-profile", "stripe-v3"}, "--provider-profile"},
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--worker-id", "w 1"}, "--worker-id"},
		{[]string{"worker", "--provider-url", "http://127.0.0.1:1", "--concurrency", "0"}, "--concurrency"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), c.args, &stdout, &stderr)
		require.Equal(t, 1, code, "%v", c.args)
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
	// A bad variable is named as the variable, on one line.
	t.Setenv("OPLEDGER_WORKER_CONCURRENCY", "0")
	t.Setenv("KAFKA_BROKERS", "nohost")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 1, run(t.Context(), []string{"worker", "--provider-url", "http://127.0.0.1:1"}, &stdout, &stderr))
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 2, stderr.String())
	require.Contains(t, stderr.String(), `opledger worker: OPLEDGER_WORKER_CONCURRENCY "0": want a whole number from 1 to 64`)
	require.Contains(t, stderr.String(), `opledger worker: KAFKA_BROKERS "nohost": kafka broker "nohost": want host:port`)
}

// `opledger dlq` on the Postgres-only transport: list shows a dead letter
// with its reason; resubmit --all republishes it under a new message id,
// once; resubmit needs a selector and an operator.
func TestDLQCommandsOnPostgres(t *testing.T) {
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
	value, err := transport.RefundRequest{MessageID: "MSG-55A", OperationID: "OP-4471", CapabilityID: "CAP-91F"}.Encode()
	require.NoError(t, err)
	require.NoError(t, q.Publish(ctx, []transport.Outbound{{Topic: transport.TopicRefundRequests, Key: "OP-4471", MessageID: "MSG-55A", Value: value}}))
	claimed, err := q.Claim(ctx, "w1", 1)
	require.NoError(t, err)
	require.NoError(t, q.Settle(ctx, claimed[0], transport.Disposition{Action: transport.ActionDeadLetter, Reason: "operation.unknown", Detail: "no such operation"}))

	dlq := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := run(context.WithoutCancel(ctx), append(append([]string{"dlq"}, args...), "--database-url", url, "--transport-schema", schema), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, _ := dlq("list")
	require.Equal(t, 0, code)
	require.Contains(t, out, "DL-1")
	require.Contains(t, out, "operation.unknown")
	require.Contains(t, out, "1 dead letters")

	code, _, errOut := dlq("resubmit", "--operator", "ops-1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--all, or --id")

	code, out, errOut = dlq("resubmit", "--all", "--operator", "ops-1")
	require.Equal(t, 0, code, errOut)
	newID := transport.ResubmissionMessageID("DL-1")
	require.Contains(t, out, "DL-1 resubmitted as "+string(newID))
	code, out, _ = dlq("resubmit", "--all", "--operator", "ops-1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 resubmitted")
	code, _, errOut = dlq("resubmit", "--id", "DL-1", "--operator", "ops-1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "already resubmitted")

	msgs, err := q.ListTopic(ctx, transport.TopicRefundRequests, 0, 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, string(newID), msgs[1].MessageID)
	req, err := transport.DecodeRefundRequest(msgs[1].Value)
	require.NoError(t, err)
	require.Equal(t, newID, req.MessageID)
	require.Equal(t, "MSG-55A", msgs[1].Headers[transport.HeaderPreviousMessage])
	require.True(t, strings.HasPrefix(msgs[1].Headers[transport.HeaderResubmittedFrom], "DL-"))

	code, out, _ = dlq("signals")
	require.Equal(t, 0, code)
	require.Contains(t, out, "0 signals")
}
