package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/adapters/httpapi/openapicheck"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// waitBound bounds every wait for a condition in these tests.
const waitBound = 30 * time.Second

// start is the ledger clock's reading when a test begins.
var start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// The token file every test server reads.
const tokenFile = `# role token [name]
agent    agent-token-0123456789     alice
worker   worker-token-0123456789
operator operator-token-0123456789  olga
auditor  auditor-token-0123456789   # no name: auditor-<hash>
subscriber subscriber-token-0123456789 portal
`

var tokenOf = map[httpapi.Role]string{
	httpapi.RoleAgent:      "agent-token-0123456789",
	httpapi.RoleWorker:     "worker-token-0123456789",
	httpapi.RoleOperator:   "operator-token-0123456789",
	httpapi.RoleAuditor:    "auditor-token-0123456789",
	httpapi.RoleSubscriber: "subscriber-token-0123456789",
}

// env is one test's running API: an event store schema, a read-model schema
// followed by a running projector, a ledger on a test clock, and the server
// behind httptest.
type env struct {
	t       *testing.T
	store   *postgres.Store
	pool    *pgxpool.Pool
	schema  string // read models
	clock   *clock.Offset
	h       *ledger.Handler
	signer  *captoken.Signer
	tokens  *httpapi.Tokens
	api     *httpapi.Server
	srv     *httptest.Server
	metrics *httpapi.Metrics
	// regressions follows the regression stream the handler's recorder
	// writes.
	regressions *regression.Monitor
	// secrets are the lease secrets claims made by execute returned.
	secrets map[domain.ExecutionID]string
}

// newEnv starts an API; tune adjusts its config before New.
func newEnv(t *testing.T, tune func(*httpapi.Config)) *env {
	t.Helper()
	store := pgtest.OpenStore(t)
	url, schema := pgtest.Schema(t)
	e := &env{t: t, store: store, schema: schema, pool: openPool(t, url), clock: clock.NewOffset(clock.NewManual(start)),
		secrets: map[domain.ExecutionID]string{}}
	_, err := projections.Migrate(t.Context(), e.pool, schema)
	require.NoError(t, err)
	e.metrics = httpapi.NewMetrics()
	recorder, err := regression.NewRecorder(regression.RecorderConfig{Store: store, Noticer: "serve", Clock: e.clock, OnNoticed: e.metrics.ObserveRegression})
	require.NoError(t, err)
	e.regressions, err = regression.NewMonitor(regression.MonitorConfig{Store: store, Clock: e.clock})
	require.NoError(t, err)
	e.h, err = ledger.New(ledger.Config{Store: store, Clock: e.clock, AppendRetryBackoff: time.Millisecond, Regressions: recorder,
		// Every refusal one by one, its fields asserted: the bound and its
		// summaries are ledgertest's (HostilePresentationsNeverDelayTheHolder).
		EvidenceBound: domain.EvidenceBound{Window: time.Hour, PerKey: 256, PerStream: 1024}, SummaryEvery: 10 * time.Millisecond})
	require.NoError(t, err)
	e.signer, err = captoken.NewSigner(bytes.Repeat([]byte{42}, captoken.SeedSize))
	require.NoError(t, err)
	e.tokens, err = httpapi.ParseTokens(strings.NewReader(tokenFile), "tokens")
	require.NoError(t, err)

	p, err := projections.New(projections.Config{
		Pool: e.pool, Store: store, Schema: schema, Clock: e.clock,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, LockRetryInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)
	require.NoError(t, p.Start(context.WithoutCancel(t.Context())))
	t.Cleanup(func() { require.NoError(t, p.Stop()) })

	cfg := httpapi.Config{
		Ledger: e.h, Signer: e.signer, Tokens: e.tokens, ReadModels: e.pool, Schema: schema,
		TestClock: e.clock, Metrics: e.metrics, ProjectionLag: p.Lag, Regressions: e.regressions,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		// Tests that hammer an endpoint must not meet the wall-clock rate
		// limit; the rate-limit tests set their own, on an injected clock.
		RateLimit: httpapi.RateLimit{Off: true},
	}
	if tune != nil {
		tune(&cfg)
	}
	e.api, err = httpapi.New(cfg)
	require.NoError(t, err)
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// response is one answer, read whole.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// code is the error code of an error answer.
func (r response) code() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r response) field() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["field"].(string)
	return s
}

func (r response) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// call sends a request as role ("" sends no token) with body (a string is
// sent as is, anything else as JSON, nil as no body).
func (e *env) call(role httpapi.Role, method, path string, body any, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(e.t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	if role != "" {
		req.Header.Set("Authorization", "Bearer "+tokenOf[role])
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := e.srv.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	openapicheck.Response(e.t, req, res, raw)
	out := response{status: res.StatusCode, header: res.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(e.t, json.Unmarshal(raw, &out.body), "body: %s", raw)
	}
	return out
}

// must requires status and returns the answer.
func (e *env) must(status int, r response) response {
	e.t.Helper()
	require.Equal(e.t, status, r.status, "body: %s", r.raw)
	return r
}

// refund is the body of a typical refund request.
func refund(order string) map[string]any {
	return map[string]any{"order_id": order, "amount_minor": 4_500, "currency": "EUR", "order_total_minor": 12_000}
}

// okFacts are facts the policy allows.
var okFacts = map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0}

// create requests an operation under key and returns its id.
func (e *env) create(key string) domain.OperationID {
	e.t.Helper()
	r := e.must(http.StatusCreated, e.call(httpapi.RoleAgent, "POST", "/v1/operations", refund("ORD-"+key), "Idempotency-Key", key))
	return domain.OperationID(r.str("operation_id"))
}

// allow decides the operation's next attempt with allowing facts and
// returns the capability and its token.
func (e *env) allow(op domain.OperationID) (domain.CapabilityID, string) {
	e.t.Helper()
	r := e.must(http.StatusOK, e.call(httpapi.RoleAgent, "POST", "/v1/operations/"+string(op)+"/decisions",
		map[string]any{"approver": "ops-lead", "approval_limit_minor": 10_000, "facts": okFacts}))
	require.Equal(e.t, "Allowed", r.str("verdict"), "body: %s", r.raw)
	c := r.body["capability"].(map[string]any)
	return domain.CapabilityID(c["capability_id"].(string)), c["token"].(string)
}

// claim presents token for op on message msg.
func (e *env) claim(op domain.OperationID, msg, token string) response {
	e.t.Helper()
	return e.call(httpapi.RoleWorker, "POST", "/v1/claims", map[string]any{
		"message_id": msg, "operation_id": string(op), "capability": token, "worker_id": "worker-1",
	})
}

// execute creates, allows and claims an operation; it returns the operation
// and the execution.
func (e *env) execute(key string) (domain.OperationID, domain.ExecutionID) {
	e.t.Helper()
	op := e.create(key)
	_, token := e.allow(op)
	r := e.must(http.StatusOK, e.claim(op, "MSG-"+key, token))
	require.Equal(e.t, "Claimed", r.str("status"), "body: %s", r.raw)
	x := domain.ExecutionID(r.str("execution_id"))
	require.NotEmpty(e.t, r.str("lease_secret"))
	e.secrets[x] = r.str("lease_secret")
	return op, x
}

// secret is the lease secret execute's claim of x returned.
func (e *env) secret(x domain.ExecutionID) string {
	e.t.Helper()
	s, found := e.secrets[x]
	require.True(e.t, found, "no claim of %s by execute", x)
	return s
}

// streamVersion is the operation stream's version, read from the store.
func (e *env) streamVersion(op domain.OperationID) int64 {
	e.t.Helper()
	s, err := e.h.Load(e.t.Context(), op)
	require.NoError(e.t, err)
	return s.Version
}

// streamTypes lists the types of a stream's events.
// unattributed is today's unattributed evidence stream, by the server's
// clock.
func (e *env) unattributed() string { return domain.UnattributedStreamFor(e.clock.Now()) }

func (e *env) streamTypes(stream string) []string {
	e.t.Helper()
	recs, err := e.store.ReadStream(e.t.Context(), stream, 0, 1000)
	require.NoError(e.t, err)
	types := make([]string, len(recs))
	for i, r := range recs {
		types[i] = r.Type
	}
	return types
}

// waitFor polls cond every few milliseconds, failing the test after
// waitBound: the read models trail the log by the projector's lag.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitBound, what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// waitRead polls a read endpoint until ok says its answer is current.
func (e *env) waitRead(path string, ok func(r response) bool) response {
	e.t.Helper()
	var last response
	waitFor(e.t, "the read model to show "+path, func() bool {
		last = e.call(httpapi.RoleAuditor, "GET", path, nil)
		return ok(last)
	})
	return last
}
