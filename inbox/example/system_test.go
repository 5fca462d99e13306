package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// The example runs against real processes: opledger serve, provider-sim
// and an opledger worker (the Postgres queue), on a schema set of their
// own; the consumer under test is this package's code, in the test.

// waitBound bounds every wait for a condition.
const waitBound = 60 * time.Second

const (
	agentToken      = "agent-token-0123456789"
	subscriberToken = "subscriber-token-0123456789"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds opledger once per test run.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "refunds-issued-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "opledger")
		out, err := exec.Command("go", "build", "-o", binPath, "opledger/cmd/opledger").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// system is a running serve, provider-sim and worker.
type system struct {
	t   *testing.T
	api string // http://host:port
	env []string
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func (s *system) start(name string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(binary(s.t), args...)
	cmd.Env = s.env
	logf, err := os.Create(filepath.Join(s.t.TempDir(), name+".log"))
	require.NoError(s.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(s.t, cmd.Start())
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if s.t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			s.t.Logf("%s log:\n%s", name, b)
		}
	})
}

func (s *system) run(args ...string) {
	s.t.Helper()
	cmd := exec.Command(binary(s.t), args...)
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	require.NoError(s.t, err, "%s: %s", args, out)
}

// startSystem migrates a fresh set of schemas and starts provider-sim,
// serve (the reconciler off: these refunds complete on their own) and one
// worker; extraEnv is added to every process's environment.
func startSystem(t *testing.T, extraEnv ...string) *system {
	t.Helper()
	url, schema := pgtest.Schema(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, fmt.Appendf(nil, "agent %s agent-7\nsubscriber %s portal\n", agentToken, subscriberToken), 0o600))
	api, sim := freeAddr(t), freeAddr(t)
	s := &system{t: t, api: "http://" + api}
	s.env = append(os.Environ(), "DATABASE_URL="+url, "OPLEDGER_STORE_SCHEMA="+schema+"_es", "OPLEDGER_SCHEMA="+schema,
		"OPLEDGER_TRANSPORT_SCHEMA="+schema+"_tr", "KAFKA_BROKERS=", "OPLEDGER_TOKENS_FILE="+tokens, "PROVIDER_URL=http://"+sim,
		"OPLEDGER_LOG_LEVEL=warn", "OPLEDGER_SIGNING_KEYS="+filepath.Join(dir, "keys"), "OPLEDGER_SIGNING_KEY_FILE=")
	s.env = append(s.env, extraEnv...)
	t.Cleanup(func() {
		for _, sc := range []string{schema + "_es", schema + "_tr"} {
			_ = exec.Command("psql", "-q", "-d", url, "-c", `DROP SCHEMA IF EXISTS "`+sc+`" CASCADE`).Run()
		}
	})
	s.run("keys", "new")
	s.run("migrate")
	s.start("provider-sim", "provider-sim", "--listen", sim)
	s.start("serve", "serve", "--listen", api, "--disable", "reconciler")
	s.start("worker", "worker", "--worker-id", "worker-go")
	deadline := time.Now().Add(waitBound)
	for {
		res, err := http.Get(s.api + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return s
			}
		}
		require.False(t, time.Now().After(deadline), "serve never became ready")
		time.Sleep(50 * time.Millisecond) // polling interval, bounded above
	}
}

// call sends an API request with token and returns the status and body.
func (s *system) call(method, path, token string, body any, header ...string) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.api+path, rd)
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer res.Body.Close()
	out := map[string]any{}
	raw, err := io.ReadAll(res.Body)
	require.NoError(s.t, err)
	if len(raw) > 0 {
		require.NoError(s.t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return res.StatusCode, out
}

// refund asks for a refund of amount under key and approves it; the
// worker executes it at provider-sim. It returns the operation id.
func (s *system) refund(key string, amount int64) string {
	s.t.Helper()
	status, r := s.call("POST", "/v1/operations", agentToken, map[string]any{
		"order_id": "ORD-" + key, "amount_minor": amount, "currency": "EUR", "order_total_minor": 100_000,
	}, "Idempotency-Key", key)
	require.Equal(s.t, http.StatusCreated, status, r)
	op := r["operation_id"].(string)
	status, d := s.call("POST", "/v1/operations/"+op+"/decisions", agentToken, map[string]any{
		"approver": "agent-7", "approval_limit_minor": 100_000,
		"facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0},
	})
	require.Equal(s.t, http.StatusOK, status, d)
	require.Equal(s.t, "Allowed", d["verdict"])
	return op
}
