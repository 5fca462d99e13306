package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi/openapicheck"
	"opledger/eventstore/postgres/pgtest"
)

// The end-to-end test starts `opledger serve` and `opledger provider-sim` as
// real processes on loopback and drives the API as a worker written in any
// other language would: plain HTTP and JSON, nothing of opledger's Go code.

// built are the binaries the tests built, by package, each built once per
// test run.
var built sync.Map // package path -> func() (string, error)

// buildOnce builds the package at pkg (a path go build takes) once per test
// run, into a directory of its own, and returns the binary's path.
func buildOnce(t *testing.T, pkg, name string) string {
	t.Helper()
	f, _ := built.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		dir, err := os.MkdirTemp("", "opledger-e2e-")
		if err != nil {
			return "", err
		}
		bin := filepath.Join(dir, name)
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
		return bin, nil
	}))
	bin, err := f.(func() (string, error))()
	require.NoError(t, err)
	return bin
}

// binary builds cmd/opledger once per test run.
func binary(t *testing.T) string { return buildOnce(t, ".", "opledger") }

const (
	agentToken    = "agent-token-0123456789"
	workerToken   = "worker-token-0123456789"
	operatorToken = "operator-token-0123456789"
	auditorToken  = "auditor-token-0123456789"
	// subscriberToken is a service downstream's: the operation feed only.
	subscriberToken = "subscriber-token-0123456789"
)

// system is one serve + provider-sim pair on their own schemas.
type system struct {
	t        *testing.T
	api, sim string
	serve    *exec.Cmd
	env      []string
	tokens   string // the tokens file serve reads
	keys     string // the signing key ring
	dbURL    string // the database (set by newRecoveringSystem)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

func start(t *testing.T, name string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = env
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s log:\n%s", name, tail(string(b), 4000))
		}
	})
	return cmd
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func newSystem(t *testing.T) *system {
	t.Helper()
	// The reconciler is off: it would (rightly) resend a lapsed execution's
	// request under its key, and these tests count requests from workers.
	// The reconciler is proven by the scenario tests in adapters/harness.
	return newSystemWith(t, "--disable", "reconciler")
}

// newSystemWith starts serve with serveArgs after the ones every system
// has (--test-clock, its own address, a sweep every 100ms).
func newSystemWith(t *testing.T, serveArgs ...string) *system {
	t.Helper()
	url, schema := pgtest.Schema(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(fmt.Sprintf(
		"# role token name\nagent %s agent-7\nworker %s worker-go\noperator %s ops-1\nauditor %s audit-1\nsubscriber %s portal\n",
		agentToken, workerToken, operatorToken, auditorToken, subscriberToken)), 0o600))
	s := &system{t: t, api: freeAddr(t), sim: freeAddr(t), tokens: tokens, keys: filepath.Join(dir, "keys")}
	s.env = append(os.Environ(), "DATABASE_URL="+url, "OPLEDGER_STORE_SCHEMA="+schema+"_es",
		"OPLEDGER_SCHEMA="+schema, "OPLEDGER_TRANSPORT_SCHEMA="+schema+"_tr", "KAFKA_BROKERS=",
		"OPLEDGER_TOKENS_FILE="+tokens, "PROVIDER_URL=http://"+s.sim, "OPLEDGER_LOG_LEVEL=warn",
		"OPLEDGER_SIGNING_KEYS="+s.keys, "OPLEDGER_SIGNING_KEY_FILE=")
	newKey := exec.Command(binary(t), "keys", "new")
	newKey.Env = s.env
	out, err := newKey.CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { dropSchemas(url, schema+"_es", schema+"_tr") })
	migrate := exec.Command(binary(t), "migrate")
	migrate.Env = s.env
	out, err = migrate.CombinedOutput()
	require.NoError(t, err, string(out))
	start(t, "provider-sim", s.env, "provider-sim", "--listen", s.sim)
	s.serve = start(t, "serve", s.env, append([]string{"serve", "--test-clock", "--listen", s.api, "--sweep-interval", "100ms"}, serveArgs...)...)
	s.waitReady()
	return s
}

func dropSchemas(url string, schemas ...string) {
	for _, sc := range schemas {
		_ = exec.Command("psql", "-q", "-d", url, "-c", "DROP SCHEMA IF EXISTS \""+sc+"\" CASCADE").Run()
	}
}

// waitReady polls /readyz and the simulator, bounded.
func (s *system) waitReady() {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r1, err1 := http.Get("http://" + s.api + "/readyz")
		r2, err2 := http.Get("http://" + s.sim + "/_sim/ledger")
		if err1 == nil && err2 == nil && r1.StatusCode == 200 && r2.StatusCode == 200 {
			r1.Body.Close()
			r2.Body.Close()
			return
		}
		for _, r := range []*http.Response{r1, r2} {
			if r != nil {
				r.Body.Close()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatal("serve or provider-sim never became ready")
}

type reply struct {
	status int
	body   map[string]any
	header http.Header
}

func (s *system) call(method, path, token string, body any, headers ...string) reply {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(s.t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+s.api+path, rd)
	require.NoError(s.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	openapicheck.Response(s.t, req, resp, raw)
	r := reply{status: resp.StatusCode, header: resp.Header, body: map[string]any{}}
	if len(raw) > 0 && strings.HasPrefix(strings.TrimSpace(string(raw)), "{") {
		require.NoError(s.t, json.Unmarshal(raw, &r.body), string(raw))
	}
	return r
}

// simLedger reads the simulator's ledger for op.
func (s *system) simLedger(op string) (requests, refunds int) {
	s.t.Helper()
	resp, err := http.Get("http://" + s.sim + "/_sim/ledger")
	require.NoError(s.t, err)
	defer resp.Body.Close()
	var l struct {
		ByOperation map[string]struct {
			RequestsReceived int `json:"requests_received"`
			RefundsCreated   int `json:"refunds_created"`
		} `json:"by_operation"`
	}
	require.NoError(s.t, json.NewDecoder(resp.Body).Decode(&l))
	c := l.ByOperation[op]
	return c.RequestsReceived, c.RefundsCreated
}

// refund is what an HTTP worker does once Claimed, by docs/api.md's recipe
// ("A worker in any language"): POST to the provider with the key the
// ledger gave it, amounts from the ledger, our reference and the key in the
// metadata.
func (s *system) refund(claim reply) string {
	s.t.Helper()
	form := url.Values{
		"amount":                    {fmt.Sprint(int64(claim.body["amount_minor"].(float64)))},
		"currency":                  {strings.ToLower(claim.body["currency"].(string))},
		"order":                     {claim.body["order_id"].(string)},
		"metadata[operation_id]":    {claim.body["operation_id"].(string)},
		"metadata[idempotency_key]": {claim.body["idempotency_key"].(string)},
	}
	req, err := http.NewRequest("POST", "http://"+s.sim+"/v1/refunds", strings.NewReader(form.Encode()))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", claim.body["idempotency_key"].(string))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	require.Equal(s.t, 200, resp.StatusCode)
	var refund struct{ ID string }
	require.NoError(s.t, json.NewDecoder(resp.Body).Decode(&refund))
	return refund.ID
}

// approve creates an operation and an Allowed decision, returning the
// operation id and the capability token.
func (s *system) approve(key string) (string, string) {
	s.t.Helper()
	r := s.call("POST", "/v1/operations", agentToken, map[string]any{
		"order_id": "ORD-8841", "amount_minor": 12000, "currency": "EUR", "order_total_minor": 24000,
	}, "Idempotency-Key", key)
	require.Equal(s.t, 201, r.status, r.body)
	op := r.body["operation_id"].(string)
	d := s.call("POST", "/v1/operations/"+op+"/decisions", agentToken, map[string]any{
		"approver": "agent-7", "approval_limit_minor": 50000,
		"facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0},
	})
	require.Equal(s.t, 200, d.status, d.body)
	require.Equal(s.t, "Allowed", d.body["verdict"])
	return op, d.body["capability"].(map[string]any)["token"].(string)
}

func (s *system) claim(op, token, msg string) reply {
	s.t.Helper()
	return s.call("POST", "/v1/claims", workerToken, map[string]any{
		"message_id": msg, "operation_id": op, "capability": token, "worker_id": "worker-py",
	})
}

func TestEndToEndOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real processes")
	}
	t.Parallel()
	s := newSystem(t)

	t.Run("a resubmitted copy is refused and never reaches the provider", func(t *testing.T) {
		op, token := s.approve("e2e-resubmit")
		c := s.claim(op, token, "MSG-55A")
		require.Equal(t, "Claimed", c.body["status"], c.body)
		ref := s.refund(c)
		path := "/v1/executions/" + c.body["execution_id"].(string) + "/outcome"
		// Knowing the execution and its epoch is not enough: the lease's
		// secret from the claim is.
		forged := s.call("POST", path, workerToken, map[string]any{"lease_epoch": c.body["lease_epoch"], "outcome": "NotApplied"})
		require.Equal(t, 409, forged.status, forged.body)
		require.Equal(t, "lease.not-held", forged.body["error"].(map[string]any)["code"])
		o := s.call("POST", path, workerToken, map[string]any{
			"lease_epoch": c.body["lease_epoch"], "lease_secret": c.body["lease_secret"], "outcome": "Completed", "provider_reference": ref,
		})
		require.Equal(t, 200, o.status, o.body)

		copyOf := s.claim(op, token, "MSG-77C") // the Friday resubmission: new id, same authority
		require.Equal(t, 200, copyOf.status)
		require.Equal(t, "AlreadyConsumed", copyOf.body["status"])
		require.Equal(t, "capability.already-consumed", copyOf.body["reason"])
		require.Equal(t, true, copyOf.body["replay_suspected"])
		require.Equal(t, false, copyOf.body["execution_attempted"])
		requests, refunds := s.simLedger(op)
		require.Equal(t, 1, requests)
		require.Equal(t, 1, refunds)
	})

	t.Run("readiness says whether writes are synchronously replicated", func(t *testing.T) {
		r := s.call("GET", "/readyz", "", nil)
		require.Equal(t, 200, r.status, "not required: ready either way")
		repl, ok := r.body["replication"].(map[string]any)
		require.True(t, ok, r.body)
		require.Equal(t, false, repl["required"])
		require.NotEmpty(t, repl["checked_at"])
		require.Contains(t, repl["detail"], "synchronous_standby_names=")
	})

	t.Run("a forged token is refused and recorded", func(t *testing.T) {
		op, token := s.approve("e2e-forged")
		payload, sig, ok := strings.Cut(token, ".")
		require.True(t, ok)
		raw, err := base64.RawURLEncoding.DecodeString(payload)
		require.NoError(t, err)
		altered := strings.Replace(string(raw), `"att":1`, `"att":2`, 1)
		require.NotEqual(t, string(raw), altered)
		forged := base64.RawURLEncoding.EncodeToString([]byte(altered)) + "." + sig
		r := s.claim(op, forged, "MSG-F1")
		require.Equal(t, "Invalid", r.body["status"], r.body)
		require.Equal(t, "capability.invalid", r.body["reason"])
		requests, _ := s.simLedger(op)
		require.Zero(t, requests)
		// The evidence is there for an auditor (the read model catches up).
		require.Eventually(t, func() bool {
			e := s.call("GET", "/v1/evidence?reason=capability.invalid&operation_id="+op, auditorToken, nil)
			list, _ := e.body["evidence"].([]any)
			return e.status == 200 && len(list) == 1
		}, 30*time.Second, 50*time.Millisecond)
		// And the genuine token still works: the forgery spent nothing.
		require.Equal(t, "Claimed", s.claim(op, token, "MSG-F2").body["status"])
	})

	t.Run("a stale epoch is refused", func(t *testing.T) {
		op, token := s.approve("e2e-stale")
		c := s.claim(op, token, "MSG-S1")
		require.Equal(t, "Claimed", c.body["status"])
		exe := c.body["execution_id"].(string)
		clk := s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "2m"})
		require.Equal(t, 200, clk.status, clk.body)
		// The sweeper (every 100ms) lapses the lease: epoch 1 -> 2.
		require.Eventually(t, func() bool {
			r := s.call("GET", "/v1/operations/"+op, auditorToken, nil)
			xs, _ := r.body["executions"].([]any)
			return len(xs) == 1 && xs[0].(map[string]any)["lease_epoch"] == float64(2)
		}, 30*time.Second, 50*time.Millisecond)
		secret := c.body["lease_secret"]
		r := s.call("POST", "/v1/executions/"+exe+"/lease", workerToken, map[string]any{"lease_epoch": 1, "lease_secret": secret})
		require.Equal(t, 409, r.status)
		o := s.call("POST", "/v1/executions/"+exe+"/outcome", workerToken, map[string]any{
			"lease_epoch": 1, "lease_secret": secret, "outcome": "Completed", "provider_reference": "re_x",
		})
		require.Equal(t, 409, o.status)
		require.Equal(t, "lease.lost", o.body["error"].(map[string]any)["code"])
		requests, refunds := s.simLedger(op)
		require.Zero(t, requests, "the stale worker sent nothing")
		require.Zero(t, refunds)
	})

	t.Run("a role cannot call what it may not", func(t *testing.T) {
		cases := []struct {
			method, path, token string
			body                any
			want                int
		}{
			{"POST", "/v1/operations", "", map[string]any{}, 401},
			{"POST", "/v1/operations", "not-a-token-at-all-000", map[string]any{}, 401},
			{"POST", "/v1/operations", workerToken, map[string]any{}, 403},
			{"POST", "/v1/operations", auditorToken, map[string]any{}, 403},
			{"POST", "/v1/claims", agentToken, map[string]any{}, 403},
			{"POST", "/v1/claims", operatorToken, map[string]any{}, 403},
			{"POST", "/v1/capabilities/CAP-1.1/revoke", workerToken, map[string]any{}, 403},
			{"POST", "/v1/executions/EXE-1.1/resolve", agentToken, map[string]any{}, 403},
			{"POST", "/v1/test-clock", agentToken, map[string]any{"advance": "1h"}, 403},
		}
		for _, c := range cases {
			r := s.call(c.method, c.path, c.token, c.body, "Idempotency-Key", "x")
			require.Equal(t, c.want, r.status, "%s %s as %q: %v", c.method, c.path, c.token, r.body)
		}
	})

	t.Run("SIGHUP reloads tokens and signing keys; old capabilities still claim", func(t *testing.T) { s.hangupReload(t) })
	t.Run("readiness names a relay that cannot reach Kafka", func(t *testing.T) { s.unreachableKafka(t) })

	t.Run("shutdown is graceful", func(t *testing.T) {
		require.NoError(t, s.serve.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- s.serve.Wait() }()
		select {
		case err := <-done:
			require.NoError(t, err, "serve exits 0 on SIGTERM")
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop within 30s of SIGTERM")
		}
	})
}
