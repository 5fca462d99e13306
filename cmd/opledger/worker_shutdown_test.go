package main

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// A worker holding a provider result while its database is unreachable
// ends within --shutdown-timeout of SIGTERM (not when its 60 s lease would
// let it stop trying), logs the execution and the provider's reference it
// could not record, and the lease's lapse and the reconciler finish the
// operation from the provider: Completed, that reference, one refund.
//
// serve (sweeper and reconciler on, its test clock) and provider-sim are
// real processes on the database; the worker is a real process whose
// database goes through a gate the test freezes (a database machine gone:
// connections hang, nothing answers). The provider holds the refund's
// response until the worker is stopping, so the result arrives while the
// database cannot be written.
func TestWorkerStopsWithinItsShutdownTimeoutDuringAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real processes")
	}
	t.Parallel()
	s := newRecoveringSystem(t)
	u, err := url.Parse(s.dbURL)
	require.NoError(t, err)
	g := newGate(t, u.Host)
	through := *u
	through.Host = g.ln.Addr().String()
	env := append(append([]string(nil), s.env...), "DATABASE_URL="+through.String())
	worker, logPath := startLogged(t, "worker", env, "worker", "--worker-id", "w-stop", "--shutdown-timeout", "2s", "--concurrency", "1")

	simPost(t, s.sim, "/_sim/faults", `{"kind":"hold-response"}`) // the next refund is created, its response withheld
	op, _ := s.approve("shutdown-1")
	require.Eventually(t, func() bool { _, refunds := s.simLedger(op); return refunds == 1 }, 60*time.Second, 20*time.Millisecond,
		"the worker claimed and the provider created the refund")

	g.freeze()
	stopped := time.Now()
	require.NoError(t, worker.Process.Signal(syscall.SIGTERM))
	simPost(t, s.sim, "/_sim/faults/release", `{}`) // the result reaches a stopping worker that cannot record it
	exited := make(chan error, 1)
	go func() { exited <- worker.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second): // the lease (60 s) would have kept it trying past this
		t.Fatal("the worker did not stop within 30 s of SIGTERM")
	}
	t.Logf("the worker stopped %s after SIGTERM (--shutdown-timeout 2s)", time.Since(stopped).Round(10*time.Millisecond))

	raw, err := os.ReadFile(logPath)
	require.NoError(t, err)
	logs := string(raw)
	line := ""
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "stopping: outcome not recorded before the shutdown timeout") {
			line = l
		}
	}
	require.NotEmpty(t, line, "the worker says what it could not record:\n%s", tail(logs, 3000))
	ref := regexp.MustCompile(`"provider_reference":"([^"]+)"`).FindStringSubmatch(line)
	require.NotNil(t, ref, line)
	require.Contains(t, line, `"outcome":"Completed"`)
	require.Regexp(t, `"execution_id":"EXE-[^"]+"`, line)

	// The sweeper lapses the lease once the ledger's clock passes it; the
	// reconciler finds the refund at the provider.
	adv := s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "2m"})
	require.Equal(t, 200, adv.status, adv.body)
	var got reply
	require.Eventually(t, func() bool {
		got = s.call("GET", "/v1/operations/"+op, operatorToken, nil)
		return got.status == 200 && got.body["state"] == "Completed"
	}, 60*time.Second, 50*time.Millisecond, "reconciled to Completed")
	xs := got.body["executions"].([]any)
	require.Len(t, xs, 1)
	require.Equal(t, ref[1], xs[0].(map[string]any)["provider_reference"], "the reference the worker logged")
	requests, refunds := s.simLedger(op)
	require.Equal(t, 1, requests)
	require.Equal(t, 1, refunds)
}

// newRecoveringSystem is newSystem with the reconciler on: serve's sweeper
// and reconciler recover what a worker left.
func newRecoveringSystem(t *testing.T) *system {
	t.Helper()
	dbURL, schema := pgtest.Schema(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(fmt.Sprintf("agent %s agent-7\nworker %s worker-go\noperator %s ops-1\nauditor %s audit-1\n",
		agentToken, workerToken, operatorToken, auditorToken)), 0o600))
	s := &system{t: t, api: freeAddr(t), sim: freeAddr(t), tokens: tokens, keys: filepath.Join(dir, "keys"), dbURL: dbURL}
	s.env = append(os.Environ(), "DATABASE_URL="+dbURL, "OPLEDGER_STORE_SCHEMA="+schema+"_es",
		"OPLEDGER_SCHEMA="+schema, "OPLEDGER_TRANSPORT_SCHEMA="+schema+"_tr", "KAFKA_BROKERS=",
		"OPLEDGER_TOKENS_FILE="+tokens, "PROVIDER_URL=http://"+s.sim, "OPLEDGER_LOG_LEVEL=warn",
		"OPLEDGER_SIGNING_KEYS="+s.keys, "OPLEDGER_SIGNING_KEY_FILE=")
	t.Cleanup(func() { dropSchemas(dbURL, schema+"_es", schema+"_tr") })
	for _, args := range [][]string{{"keys", "new"}, {"migrate"}} {
		cmd := exec.Command(binary(t), args...)
		cmd.Env = s.env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	start(t, "provider-sim", s.env, "provider-sim", "--listen", s.sim)
	s.serve = start(t, "serve", s.env, "serve", "--test-clock", "--listen", s.api, "--sweep-interval", "100ms", "--reconcile-interval", "200ms")
	s.waitReady()
	return s
}

// startLogged is start, returning the log's path.
func startLogged(t *testing.T, name string, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(path)
	require.NoError(t, err)
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = logf.Close()
	})
	return cmd, path
}

// simPost calls one of provider-sim's /_sim endpoints.
func simPost(t *testing.T, sim, path, body string) {
	t.Helper()
	resp, err := http.Post("http://"+sim+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, path)
}
