package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// probeScript answers the watch's questions from a list, then repeats the
// last answer.
type probeScript struct {
	mu      sync.Mutex
	answers []probeAnswer
}

type probeAnswer struct {
	r   eventstore.Replication
	err error
}

func (p *probeScript) Replication(context.Context) (eventstore.Replication, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.answers[0]
	if len(p.answers) > 1 {
		p.answers = p.answers[1:]
	}
	return a.r, a.err
}

var (
	synced   = probeAnswer{r: eventstore.Replication{Synchronous: true, SyncStandbys: 1, Detail: "synchronous: 1 standby"}}
	unsynced = probeAnswer{r: eventstore.Replication{Detail: "NOT synchronous: synchronous_standby_names is empty"}}
	outage   = probeAnswer{err: eventstore.Unavailable("replication", errors.New("connection refused"))}
)

// watchFor is a watch over a scripted probe on a clock the test moves.
func watchFor(t *testing.T, required bool, answers ...probeAnswer) (*replicationWatch, *bytes.Buffer, *time.Time) {
	t.Helper()
	var logs bytes.Buffer
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	w, err := newReplicationWatch(replicationSettings{required: required, interval: time.Second}, &probeScript{answers: answers},
		slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, err)
	w.now = func() time.Time { return now }
	return w, &logs, &now
}

// By default a database without a synchronous standby is said loudly, once
// per change, and the process runs on; the status follows every answer.
func TestReplicationWatchWarnsAndRuns(t *testing.T) {
	w, logs, _ := watchFor(t, false, unsynced, unsynced, synced, outage, unsynced)
	require.NoError(t, w.start(t.Context()))
	require.Contains(t, logs.String(), "WRITES ARE NOT SYNCHRONOUSLY REPLICATED")
	require.Contains(t, logs.String(), "OPLEDGER_REQUIRE_SYNC_REPLICATION=true")
	st := w.status()
	require.False(t, st.Synchronous)
	require.False(t, st.Required)
	require.NotNil(t, st.CheckedAt)

	_, err := w.check(t.Context()) // the same answer: said once
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(logs.String(), "WRITES ARE NOT SYNCHRONOUSLY REPLICATED"))
	_, err = w.check(t.Context())
	require.NoError(t, err)
	require.True(t, w.status().Synchronous)
	require.Contains(t, logs.String(), "writes are synchronously replicated")
	_, err = w.check(t.Context()) // an outage: not synchronous as far as anyone can tell
	require.Error(t, err)
	require.False(t, w.status().Synchronous)
	require.Contains(t, w.status().Detail, "cannot ask the database: ")
	require.Contains(t, logs.String(), "cannot ask the database whether writes are synchronously replicated")
	_, err = w.check(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(logs.String(), "WRITES ARE NOT SYNCHRONOUSLY REPLICATED"), "lost again: said again")
	require.NoError(t, w.overdue(), "never stops unless required")
}

// Required, it refuses to start without synchronous replication or
// without an answer, and stops the process once answers have said "not
// synchronous" for replicationGrace; outages do not count, a synchronous
// answer starts the count again.
func TestReplicationWatchRequired(t *testing.T) {
	w, _, _ := watchFor(t, true, unsynced)
	err := w.start(t.Context())
	require.ErrorContains(t, err, "replication required (OPLEDGER_REQUIRE_SYNC_REPLICATION) and the event store's writes are NOT synchronous: synchronous_standby_names is empty")
	w, _, _ = watchFor(t, true, outage)
	require.ErrorContains(t, w.start(t.Context()), "cannot say whether writes are synchronously replicated")

	w, logs, now := watchFor(t, true, synced, unsynced, outage, synced, unsynced, unsynced, unsynced)
	require.NoError(t, w.start(t.Context()))
	require.True(t, w.status().Required)
	step := func() error {
		*now = now.Add(replicationGrace / 2)
		if _, err := w.check(t.Context()); err != nil {
			return nil
		}
		return w.overdue()
	}
	require.NoError(t, step()) // not synchronous
	require.Contains(t, logs.String(), "requires it: not ready; stopping unless a synchronous standby returns")
	require.NoError(t, step()) // an outage: no answer
	require.NoError(t, step()) // synchronous again: the count starts over
	require.NoError(t, step()) // not synchronous
	require.NoError(t, step()) // half the grace without
	require.ErrorContains(t, step(), "have not been synchronously replicated for 1m0s")
}

// serve and the worker refuse to start with replication required and a
// session that commits locally (synchronous_commit=local: whatever the
// server's standbys, nothing waits for them), naming the setting and what
// the server said.
func TestServeAndWorkerRefuseWithoutSyncReplication(t *testing.T) {
	url, schema := pgtest.Schema(t)
	t.Setenv("KAFKA_BROKERS", "")
	base := []string{"--database-url", url + "&options=-c%20synchronous_commit%3Dlocal", "--store-schema", schema + "_es",
		"--transport-schema", schema + "_tr"}
	t.Cleanup(func() { dropSchemas(url, schema+"_es", schema+"_tr") })
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(t.Context(), append([]string{"migrate", "--schema", schema}, base...), &stdout, &stderr), stderr.String())
	for _, args := range [][]string{
		{"serve", "--schema", schema, "--dev", "--tokens", writeTokens(t), "--provider-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"},
		{"worker", "--provider-url", "http://127.0.0.1:1"},
	} {
		stderr.Reset()
		code := run(t.Context(), append(append(args, base...), "--require-sync-replication"), &stdout, &stderr)
		require.Equal(t, 1, code, stderr.String())
		require.Contains(t, stderr.String(), "replication required (OPLEDGER_REQUIRE_SYNC_REPLICATION) and the event store's writes are NOT synchronous", args[0])
		require.Contains(t, stderr.String(), "synchronous_commit=local does not wait for a standby", args[0])
	}
}

// writeTokens writes a tokens file of one agent token and returns its path.
func writeTokens(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(path, []byte("agent "+agentToken+" agent-7\n"), 0o600))
	return path
}
