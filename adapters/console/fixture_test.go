package console_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/adapters/captoken"
	"opledger/adapters/console"
	"opledger/adapters/harness"
	"opledger/adapters/harness/pgstack"
	"opledger/adapters/httpapi"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/regression"
	"opledger/domain/setaside"
	"opledger/domain/worker"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// waitBound bounds every wait for a condition in these tests.
const waitBound = 30 * time.Second

// The token file of the served console.
const tokenFile = `operator operator-token-0123456789 olga
auditor  auditor-token-0123456789  audrey
agent    agent-token-0123456789    agent-7
worker   worker-token-0123456789   worker-api
`

var tokenOf = map[httpapi.Role]string{
	httpapi.RoleOperator: "operator-token-0123456789",
	httpapi.RoleAuditor:  "auditor-token-0123456789",
	httpapi.RoleAgent:    "agent-token-0123456789",
	httpapi.RoleWorker:   "worker-token-0123456789",
}

// The fixture's operations beside the seed's OP-4471.
const (
	opEscalated domain.OperationID = "OP-4472" // claimed, its worker gone, lapsed, escalated by the reconciler
	opPending   domain.OperationID = "OP-4473" // approved, its capability waiting on the queue
	opExport    domain.OperationID = "OP-4474" // three downloads of export EXP-4474 approved, none claimed
)

// served is the seed's story played through serve's roles (harness: the
// relay into the Postgres-only transport, the projector, sweeper and
// reconciler on the read models), then an escalated operation, a dead
// letter carrying the story's spent authority and a failing item, all
// served by the HTTP API with the console mounted, as serve mounts it.
type served struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	// viewSchema holds the read models, signer signs capabilities: to
	// serve variants of the API.
	viewSchema string
	signer     *captoken.Signer
	world      *harness.World
	queue      *pgqueue.Queue
	reads      *projections.Reads
	srv        *httptest.Server
	cfg        console.Config // the console's, to serve variants of it
	// tlsTransport trusts a TLS variant's certificate.
	tlsTransport http.RoundTripper
	logs         *syncBuffer
	story        harness.Summary
	capStory     domain.CapabilityID
	// escalated is the execution of opEscalated; deadLetter the dead
	// letter's id.
	escalated  domain.ExecutionID
	deadLetter string
	// store is the event store; regressions the monitor of its regression
	// stream the health page reads.
	store       eventstore.Store
	regressions *regression.Monitor
}

// workerResult is what a worker did with a delivery.
type workerResult = worker.Result

// syncBuffer is a log sink shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newServed(t *testing.T) *served {
	t.Helper()
	ctx := t.Context()
	url, storeSchema := pgtest.Schema(t)
	_, viewSchema := pgtest.Schema(t)
	_, transportSchema := pgtest.Schema(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := pgtest.OpenMigrated(t, url, storeSchema)
	s := &served{t: t, url: url, pool: pool, logs: &syncBuffer{}, store: store}
	s.regressions, err = regression.NewMonitor(regression.MonitorConfig{Store: store})
	require.NoError(t, err)
	quiet := slog.New(slog.DiscardHandler)

	// Thursday and Friday through the relay, the queue and the read models.
	stack, err := pgstack.Start(ctx, pool, store, pgstack.Options{ViewSchema: viewSchema, TransportSchema: transportSchema, Logger: quiet})
	require.NoError(t, err)
	s.world, err = harness.New(harness.Options{Store: store, ClientAttempts: 1, Logger: quiet, Index: stack.Index, SetAside: stack.SetAside})
	require.NoError(t, err)
	t.Cleanup(s.world.Close)
	s.story, err = harness.RunStory(ctx, s.world, io.Discard, stack.Courier)
	require.NoError(t, err)
	require.Equal(t, 1, s.story.RefundsCreated)
	require.NoError(t, stack.Stop())
	st, err := s.world.State(ctx, harness.StoryOperation)
	require.NoError(t, err)
	s.capStory = st.Executions[0].CapabilityID

	// serve's roles from here on: the projector and the relays.
	projector, err := projections.New(projections.Config{Pool: pool, Store: store, Schema: viewSchema, Logger: quiet,
		MaxBackoff: 20 * time.Millisecond, LockRetryInterval: 20 * time.Millisecond, SetAside: stack.SetAside})
	require.NoError(t, err)
	require.NoError(t, projector.Start(context.WithoutCancel(ctx)))
	t.Cleanup(func() { require.NoError(t, projector.Stop()) })
	s.queue, err = pgqueue.New(pgqueue.Config{DB: pool, Schema: transportSchema, WorkerID: "fixture", Logger: quiet})
	require.NoError(t, err)
	s.deadLetter = s.deadLetterOfTheStory()

	checks, err := pgstate.NewCheckpoints(pool, transportSchema)
	require.NoError(t, err)
	relays, err := transport.StandardRelays(transport.RelaysConfig{Store: store, Checkpoints: checks, Publisher: s.queue, SetAside: stack.SetAside, Logger: quiet})
	require.NoError(t, err)
	rctx, stopRelays := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Go(func() { _ = r.Run(rctx) })
	}
	t.Cleanup(func() { stopRelays(); wg.Wait() })

	s.escalated = s.escalate()
	_, err = s.world.Approve(ctx, opPending, "ORD-8843", 2500)
	require.NoError(t, err)
	_, err = s.world.ApproveDownloads(ctx, opExport, "EXP-4474", 3)
	require.NoError(t, err)
	_, err = stack.SetAside.Fail(ctx, setaside.Failure{Role: setaside.RoleReconciler, Item: "EXE-4499.1", OperationID: "OP-4499",
		Reason: "store.error", Detail: "append: connection reset by peer", At: s.world.Clock.Now()}, setaside.Policy{MaxAttempts: 5})
	require.NoError(t, err)

	s.reads, err = projections.NewReads(pool, viewSchema)
	require.NoError(t, err)
	s.recordLagHistory()

	// The API, with the console mounted, as serve runs them.
	signer, err := captoken.NewSigner(bytes.Repeat([]byte{7}, captoken.SeedSize))
	require.NoError(t, err)
	tokens, err := httpapi.ParseTokens(strings.NewReader(tokenFile), "tokens")
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(s.logs, nil))
	s.viewSchema, s.signer = viewSchema, signer
	api, err := httpapi.New(httpapi.Config{Ledger: s.world.Ledger, Signer: signer, Tokens: tokens, ReadModels: pool, Schema: viewSchema,
		ProjectionLag: projector.Lag, SetAside: stack.SetAside, Logger: log})
	require.NoError(t, err)
	sessions, err := console.NewPostgresSessions(pool, transportSchema)
	require.NoError(t, err)
	s.cfg = console.Config{
		Sessions: sessions, RateLimit: api.TakeRequest,
		Reads: s.reads, Ledger: s.world.Ledger, Tokens: tokens, DeadLetters: s.queue, SetAside: stack.SetAside, Logger: log,
		SessionKey: bytes.Repeat([]byte{9}, console.MinKeyLength), Refresh: time.Second,
		Health: console.Health{
			Regressions:   s.regressions,
			ProjectionLag: projector.Lag,
			Roles: func(context.Context) []httpapi.RoleStatus {
				since := s.world.Clock.Now()
				return []httpapi.RoleStatus{
					{Role: "projector", State: "running", OK: true, Since: &since},
					{Role: "relay", State: "running", OK: true, Since: &since},
					{Role: "sweeper", State: "disabled", OK: true, Detail: "run by the test"},
					{Role: "reconciler", State: "disabled", OK: true, Detail: "run by the test"},
				}
			},
			Replication: func() httpapi.Replication {
				return httpapi.Replication{Detail: "NOT synchronous: synchronous_standby_names is empty: a commit is acknowledged once on this server's disk alone"}
			},
			Relays: func(ctx context.Context) []console.RelayState {
				var out []console.RelayState
				for _, r := range relays {
					lag, err := r.Lag(ctx)
					out = append(out, console.RelayState{Status: r.Status(), Lag: lag, LagErr: err})
				}
				return out
			},
		},
	}
	ui, err := console.New(s.cfg)
	require.NoError(t, err)
	api.Mount(console.Prefix, ui)
	s.srv = httptest.NewServer(api)
	t.Cleanup(s.srv.Close)

	// Through the API: a forged capability token, and worker-d's process
	// back from the dead reporting without its lease.
	require.Contains(t, s.apiPost(httpapi.RoleWorker, "/v1/claims", http.StatusOK, `{"message_id":"MSG-F0RGED","correlation_id":"COR-X",`+
		`"operation_id":"OP-4471","capability":"eyJmb3JnZWQiOnRydWV9.c2lnbmF0dXJl","worker_id":"worker-z"}`), `"status":"Invalid"`)
	s.apiPost(httpapi.RoleWorker, "/v1/executions/"+string(s.escalated)+"/outcome", http.StatusConflict,
		`{"lease_epoch":1,"lease_secret":"not-the-lease-secret-0000","outcome":"Completed","provider_reference":"re_late"}`)
	s.waitProjected()
	return s
}

// apiPost sends a JSON request to the API as role, expects status and
// returns the answer: the fixture's hostile requests.
func (s *served) apiPost(role httpapi.Role, path string, status int, body string) string {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.srv.URL+path, strings.NewReader(body))
	require.NoError(s.t, err)
	req.Header.Set("Authorization", "Bearer "+tokenOf[role])
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(s.t, err)
	msg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(s.t, status, res.StatusCode, "%s: %s", path, msg)
	return string(msg)
}

// deadLetterOfTheStory dead-letters a copy of the story's first message
// (its authority long spent) as a transport that gave up on it would.
func (s *served) deadLetterOfTheStory() string {
	ctx := s.t.Context()
	value, err := transport.RefundRequest{MessageID: "MSG-55A-COPY", OperationID: harness.StoryOperation, CapabilityID: s.capStory}.Encode()
	require.NoError(s.t, err)
	require.NoError(s.t, s.queue.Publish(ctx, []transport.Outbound{{Topic: transport.TopicRefundRequests, Key: string(harness.StoryOperation),
		MessageID: "MSG-55A-COPY", Value: value}}))
	var claimed []pgqueue.Claimed
	waitFor(s.t, "the copy on the queue", func() bool {
		claimed, err = s.queue.Claim(ctx, "fixture", 10)
		require.NoError(s.t, err)
		return len(claimed) > 0
	})
	require.Len(s.t, claimed, 1, "only the copy waits on the queue")
	require.NoError(s.t, s.queue.Settle(ctx, claimed[0], transport.Disposition{Action: transport.ActionDeadLetter,
		Reason: domain.ReasonDeliveryAttemptsExhausted, Detail: "handed out 5 times without success"}))
	dead, err := s.queue.ListDeadLetters(ctx, 10)
	require.NoError(s.t, err)
	require.Len(s.t, dead, 1)
	return dead[0].ID
}

// escalate writes OP-4472: approved, claimed by a worker whose process
// dies after its provider call, its lease lapsed by the sweeper, and
// escalated by the reconciler, which could not tell.
func (s *served) escalate() domain.ExecutionID {
	ctx, w := s.t.Context(), s.world
	w.Clock.Advance(30 * time.Minute)
	r, err := w.Approve(ctx, opEscalated, "ORD-8842", 4500)
	require.NoError(s.t, err)
	wk, err := worker.New(worker.Config{ID: "worker-d", Ledger: harness.CrashAfterClaim{Ledger: w.Ledger}, Provider: w.Provider,
		Clock: w.Clock, Logger: w.Logger, After: w.WorkerTimers.After})
	require.NoError(s.t, err)
	res, err := wk.Handle(ctx, r.Delivery("MSG-61B"))
	require.NoError(s.t, err)
	require.NotNil(s.t, res.Claim.Claimed)
	x := res.Claim.ExecutionID
	w.Clock.Advance(domain.DefaultLeaseDuration + time.Second)
	_, err = w.Ledger.LapseLease(ctx, opEscalated, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(s.t, err)
	w.Clock.Advance(time.Minute)
	require.NoError(s.t, w.Ledger.Escalate(ctx, opEscalated, domain.Escalate{ExecutionID: x, Reason: "reconciliation.cannot-tell",
		Detail: "inconclusive 5 times: provider lookup failed: context deadline exceeded"}, ledger.Cause{Actor: "reconciler", CausationID: string(x)}))
	return x
}

// waitProjected waits until the read models show the fixture.
func (s *served) waitProjected() {
	s.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		a, _, errA := s.reads.Operation(s.t.Context(), string(harness.StoryOperation))
		b, _, errB := s.reads.Operation(s.t.Context(), string(opPending))
		x, _, errX := s.reads.Operation(s.t.Context(), string(opExport))
		if errA == nil && errB == nil && errX == nil && a.State == "Completed" && b.State == "Authorized" && x.State == "Authorized" {
			esc, err := s.reads.ListEscalations(s.t.Context(), nil, 10)
			require.NoError(s.t, err)
			refused, err := s.reads.ListEvidence(s.t.Context(), projections.EvidenceQuery{Kind: projections.EvidenceWriteRefused})
			require.NoError(s.t, err)
			forged, err := s.reads.ListEvidence(s.t.Context(), projections.EvidenceQuery{Reason: string(domain.ReasonCapabilityInvalid)})
			require.NoError(s.t, err)
			if len(esc.Escalations) == 1 && len(refused.Evidence) == 1 && len(forged.Evidence) == 1 {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the read models did not show the fixture within %s", waitBound)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// recordLagHistory writes what serve's lag history records each minute
// (cmd/opledger, serve_lag_history.go) for the hour before the world's
// clock: the projector caught up but for a minute of backlog 25 minutes
// ago, the relay a little behind throughout, one minute missing.
func (s *served) recordLagHistory() {
	now := s.world.Clock.Now()
	for m := 60; m >= 0; m-- {
		if m == 40 {
			continue // serve was restarting: no sample
		}
		projector := time.Duration(0)
		if m >= 23 && m <= 27 {
			projector = time.Duration(30-m) * 9 * time.Second
		}
		relay := time.Duration(2+m%5) * time.Second
		require.NoError(s.t, s.reads.RecordLag(s.t.Context(), now.Add(-time.Duration(m)*time.Minute), []projections.LagSample{
			{Source: projections.LagSourceProjector, Events: int64(projector / time.Second), Behind: projector},
			{Source: "relay:refund-requests", Events: int64(relay / time.Second), Behind: relay},
		}))
	}
}
