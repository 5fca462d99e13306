package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/client"
)

// The Go client (opledger/client) against real serve and provider-sim
// processes: every claim status and error typed, a worker's refund made
// once and found where the reconciler looks, the lease lost mid-call, late
// evidence, and 503 storms from a fault-injecting proxy in front of serve.
// Each proves its negative on the simulator's ledger.

// clientWaitBound bounds every wait for a condition here.
const clientWaitBound = 30 * time.Second

// faultProxy stands in front of serve and answers 503 store.unavailable
// in its stead: before forwarding (the request never reached serve) or
// after (serve did it; the answer is lost). It keeps every request it saw.
type faultProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	// before and after count the 503s still to inject, by path suffix.
	before, after map[string]int
	seen          []seenRequest
}

type seenRequest struct {
	path string
	body string
}

func newFaultProxy(t *testing.T, api string) *faultProxy {
	t.Helper()
	target, err := url.Parse("http://" + api)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &faultProxy{before: map[string]int{}, after: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		before, after := p.take(r.URL.Path, string(body))
		if before {
			unavailable(w)
			return
		}
		if after {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			unavailable(w)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func unavailable(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(`{"error":{"code":"store.unavailable","message":"injected by the test's proxy"}}`))
}

// take records the request and says whether to answer it 503 before or
// after forwarding it.
func (p *faultProxy) take(path, body string) (before, after bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, seenRequest{path, body})
	for suffix, n := range p.before {
		if n > 0 && strings.HasSuffix(path, suffix) {
			p.before[suffix]--
			return true, false
		}
	}
	for suffix, n := range p.after {
		if n > 0 && strings.HasSuffix(path, suffix) {
			p.after[suffix]--
			return false, true
		}
	}
	return false, false
}

func (p *faultProxy) inject(before, after map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before, p.after = before, after
}

// bodies are the bodies of the requests seen whose path ends in suffix.
func (p *faultProxy) bodies(suffix string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range p.seen {
		if strings.HasSuffix(r.path, suffix) {
			out = append(out, r.body)
		}
	}
	return out
}

// ticker drives the lease keeper's renewals by hand: a wait of exactly
// every (a third of the lease) returns a channel the test fires; every
// other wait is real.
type ticker struct {
	every time.Duration
	c     chan time.Time
}

func newTicker(lease time.Duration) *ticker {
	return &ticker{every: lease / 3, c: make(chan time.Time)}
}

func (k *ticker) after(d time.Duration) <-chan time.Time {
	if d == k.every {
		return k.c
	}
	return time.After(d)
}

// fire lets one renewal go; bounded, so a keeper that stopped waiting fails the test.
func (k *ticker) fire(t *testing.T) {
	t.Helper()
	select {
	case k.c <- time.Now():
	case <-time.After(clientWaitBound):
		t.Fatal("the lease keeper never waited for its next renewal")
	}
}

func (s *system) goClient(t *testing.T, base string, tune func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{BaseURL: base, Token: workerToken, WorkerID: "worker-go-client",
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if tune != nil {
		tune(&cfg)
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	return c
}

// decide creates a refund (or, with exportUses > 0, an export download of
// that many uses) and an Allowed decision; it returns the operation and
// the capability answered.
func (s *system) decide(t *testing.T, key string, exportUses int) (op string, capability map[string]any) {
	t.Helper()
	create := map[string]any{"order_id": "ORD-" + key, "amount_minor": 12000, "currency": "EUR", "order_total_minor": 24000}
	decision := map[string]any{"approver": "agent-7", "approval_limit_minor": 50000,
		"facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0}}
	if exportUses > 0 {
		create = map[string]any{"kind": "export-download", "export_id": "EXP-" + key}
		decision = map[string]any{"approver": "agent-7", "uses": exportUses, "facts": map[string]any{"export_ready": true}}
	}
	r := s.call("POST", "/v1/operations", agentToken, create, "Idempotency-Key", key)
	require.Equal(t, 201, r.status, r.body)
	op = r.body["operation_id"].(string)
	d := s.call("POST", "/v1/operations/"+op+"/decisions", agentToken, decision)
	require.Equal(t, 200, d.status, d.body)
	return op, d.body["capability"].(map[string]any)
}

// waitExecution polls the operation's read model until its only execution
// satisfies ok.
func (s *system) waitExecution(t *testing.T, op string, ok func(x map[string]any) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		r := s.call("GET", "/v1/operations/"+op, auditorToken, nil)
		xs, _ := r.body["executions"].([]any)
		return r.status == 200 && len(xs) == 1 && ok(xs[0].(map[string]any))
	}, clientWaitBound, 20*time.Millisecond)
}

// waitReceived polls the simulator until it received n requests for op.
func (s *system) waitReceived(t *testing.T, op string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { got, _ := s.simLedger(op); return got >= n }, clientWaitBound, 10*time.Millisecond)
}

func (s *system) armFault(t *testing.T, kind, op string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"kind": kind, "operation_id": op})
	resp, err := http.Post("http://"+s.sim+"/_sim/faults", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func TestGoClientAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts real processes")
	}
	t.Parallel()
	s := newSystemWith(t, "--disable", "reconciler", "--enable-kinds", "export-download")
	api := "http://" + s.api
	refunds := client.StripeRefunds{BaseURL: "http://" + s.sim}
	ctx := t.Context()

	t.Run("every claim status is typed; only Claimed carries an execution", func(t *testing.T) {
		c := s.goClient(t, api, nil)
		op, capability := s.decide(t, "go-statuses", 0)
		token := capability["token"].(string)
		claimed, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-1", OperationID: op, Capability: token})
		require.NoError(t, err)
		require.Equal(t, client.Claimed, claimed.Status)
		x := claimed.Execution
		require.NotNil(t, x)
		require.Equal(t, "refund-"+op+"-a1", x.IdempotencyKey, "refund-<operation>-a<attempt>")
		require.Equal(t, client.KindRefund, x.Kind)
		require.EqualValues(t, 1, x.LeaseEpoch)
		require.Equal(t, int64(12000), x.AmountMinor)
		require.Equal(t, "EUR", x.Currency)
		require.Equal(t, "ORD-go-statuses", x.OrderID)
		require.Equal(t, map[string]string{"operation_id": op, "idempotency_key": x.IdempotencyKey}, x.ProviderMetadata())
		require.True(t, x.Deadline().After(time.Now()))

		dup, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-1", OperationID: op, Capability: token})
		require.NoError(t, err)
		require.Equal(t, client.DuplicateDelivery, dup.Status)
		require.Equal(t, client.ReasonDeliveryDuplicate, dup.Reason)
		require.Nil(t, dup.Execution)

		spent, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-2", OperationID: op, Capability: token})
		require.NoError(t, err)
		require.Equal(t, client.AlreadyConsumed, spent.Status)
		require.Equal(t, client.ReasonCapabilityAlreadyConsumed, spent.Reason)
		require.True(t, spent.ReplaySuspected)
		require.False(t, spent.ExecutionAttempted)

		payload, sig, _ := strings.Cut(token, ".")
		raw, err := base64.RawURLEncoding.DecodeString(payload)
		require.NoError(t, err)
		forged := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"att":1`, `"att":2`, 1))) + "." + sig
		invalid, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-3", OperationID: op, Capability: forged})
		require.NoError(t, err)
		require.Equal(t, client.Invalid, invalid.Status)
		require.Equal(t, client.ReasonCapabilityInvalid, invalid.Reason)

		revokedOp, revokedCap := s.decide(t, "go-revoked", 0)
		r := s.call("POST", "/v1/capabilities/"+revokedCap["capability_id"].(string)+"/revoke", operatorToken, map[string]any{"reason": "test"})
		require.Equal(t, 200, r.status, r.body)
		revoked, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-4", OperationID: revokedOp, Capability: revokedCap["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.Revoked, revoked.Status)
		require.Equal(t, client.ReasonCapabilityRevoked, revoked.Reason)

		exportOp, exportCap := s.decide(t, "go-busy", 2)
		first, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-5", OperationID: exportOp, Capability: exportCap["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.Claimed, first.Status)
		require.Equal(t, "export-"+exportOp+"-a1-u1", first.Execution.IdempotencyKey, "export-<operation>-a<attempt>-u<use>")
		busy, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-6", OperationID: exportOp, Capability: exportCap["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.OperationNotExecutable, busy.Status)
		require.Equal(t, client.ReasonOperationExecuting, busy.Reason)

		// Last: the clock moves 16 minutes, past the capability's lifetime.
		expiredOp, expiredCap := s.decide(t, "go-expired", 0)
		require.Equal(t, 200, s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "16m"}).status)
		expired, err := c.Claim(ctx, client.Message{MessageID: "MSG-GO-7", OperationID: expiredOp, Capability: expiredCap["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.Expired, expired.Status)
		require.Equal(t, client.ReasonCapabilityExpired, expired.Reason)

		for _, o := range []string{op, revokedOp, exportOp, expiredOp} {
			requests, _ := s.simLedger(o)
			require.Zero(t, requests, "claims alone send nothing")
		}
	})

	t.Run("every documented error is typed", func(t *testing.T) {
		op, capability := s.decide(t, "go-errors", 0)
		m := client.Message{MessageID: "MSG-GO-E1", OperationID: op, Capability: capability["token"].(string)}

		stranger := s.goClient(t, api, func(c *client.Config) { c.Token = "not-a-token-of-this-server" })
		_, err := stranger.Claim(ctx, m)
		var e *client.Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, 401, e.StatusCode)
		require.ErrorIs(t, err, client.ErrUnauthenticated)

		agent := s.goClient(t, api, func(c *client.Config) { c.Token = agentToken })
		_, err = agent.Claim(ctx, m)
		require.ErrorIs(t, err, client.ErrForbidden)

		c := s.goClient(t, api, nil)
		bad := m
		bad.MessageID = "MSG-GO-E1\u202e"
		w := &client.Worker{Client: c, Executor: refunds}
		_, err = w.Handle(ctx, bad)
		require.ErrorIs(t, err, client.ErrRequestInvalid)
		require.ErrorIs(t, err, client.ErrMalformedMessage, "dead-letter it")
		require.ErrorAs(t, err, &e)
		require.Equal(t, "message_id", e.Field)

		claimed, err := c.Claim(ctx, m)
		require.NoError(t, err)
		x := claimed.Execution
		other := s.goClient(t, api, func(c *client.Config) { c.WorkerID = "worker-other" })
		err = other.RenewLease(ctx, x)
		require.ErrorIs(t, err, client.ErrLeaseLost, "another worker owns the lease")
		require.True(t, errors.As(err, &e) && e.Refusal() && !e.Temporary())
		require.NoError(t, c.RenewLease(ctx, x))
		require.NoError(t, c.RecordOutcome(ctx, x, client.Result{Outcome: client.NotApplied, Detail: "nothing sent"}))
		err = c.RecordOutcome(ctx, x, client.Result{Outcome: client.NotApplied, Detail: "again"})
		require.ErrorIs(t, err, client.ErrLeaseLost, "the execution ended")
		err = c.RecordLateOutcome(ctx, x, client.Result{Outcome: client.NotApplied, Detail: "late"})
		require.ErrorIs(t, err, client.ErrExecutionNotUnknown)
	})

	t.Run("a worker's refund is made once, where the reconciler finds it", func(t *testing.T) {
		c := s.goClient(t, api, nil)
		w := &client.Worker{Client: c, Executor: client.ByKind{client.KindRefund: refunds}}
		op, capability := s.decide(t, "go-once", 0)
		m := client.Message{MessageID: "MSG-GO-O1", OperationID: op, Capability: capability["token"].(string)}
		h, err := w.Handle(ctx, m)
		require.NoError(t, err)
		require.Equal(t, client.Claimed, h.Claim.Status)
		require.Equal(t, client.Completed, h.Result.Outcome, h.Result.Detail)
		require.Equal(t, client.RecordedOutcome, h.Recorded)
		require.NoError(t, h.RecordErr)

		again, err := w.Handle(ctx, m) // the queue redelivers
		require.NoError(t, err)
		require.Equal(t, client.DuplicateDelivery, again.Claim.Status)
		require.False(t, again.Executed)
		resubmitted, err := w.Handle(ctx, client.Message{MessageID: "MSG-GO-O2", OperationID: op, Capability: m.Capability})
		require.NoError(t, err)
		require.Equal(t, client.AlreadyConsumed, resubmitted.Claim.Status)
		requests, created := s.simLedger(op)
		require.Equal(t, 1, requests)
		require.Equal(t, 1, created)

		// The reconciler's lookup: by our operation id, under the claim's key.
		resp, err := http.Get("http://" + s.sim + "/v1/refunds?operation_id=" + op)
		require.NoError(t, err)
		var list struct {
			Data []struct {
				ID       string
				Metadata map[string]string
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
		resp.Body.Close()
		require.Len(t, list.Data, 1)
		require.Equal(t, h.Result.ProviderReference, list.Data[0].ID)
		require.Equal(t, h.Claim.Execution.IdempotencyKey, list.Data[0].Metadata["idempotency_key"])
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Completed" })
	})

	t.Run("an export download is delivered once per use, under the use's key", func(t *testing.T) {
		c := s.goClient(t, api, nil)
		w := &client.Worker{Client: c, Executor: client.ByKind{client.KindExportDownload: client.ExportDeliveries{BaseURL: "http://" + s.sim}}}
		op, capability := s.decide(t, "go-export", 1)
		h, err := w.Handle(ctx, client.Message{MessageID: "MSG-GO-X1", OperationID: op, Capability: capability["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.Completed, h.Result.Outcome, h.Result.Detail)
		require.Equal(t, client.RecordedOutcome, h.Recorded)
		resp, err := http.Get("http://" + s.sim + "/_sim/ledger")
		require.NoError(t, err)
		var l struct {
			DeliveriesByKey map[string]int `json:"deliveries_by_key"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
		resp.Body.Close()
		require.Equal(t, 1, l.DeliveriesByKey["export-"+op+"-a1-u1"])
	})

	t.Run("the example worker handles its queue's messages", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "refundworker")
		out, err := exec.Command("go", "build", "-o", bin, "../../client/example/refundworker").CombinedOutput()
		require.NoError(t, err, string(out))
		op, capability := s.decide(t, "go-example", 0)
		var in strings.Builder
		for _, id := range []string{"MSG-GO-EX1", "MSG-GO-EX1", "MSG-GO-EX2"} { // a redelivery, a resubmission
			line, _ := json.Marshal(client.Message{MessageID: id, OperationID: op, Capability: capability["token"].(string)})
			in.Write(append(line, '\n'))
		}
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "OPLEDGER_URL="+api, "OPLEDGER_TOKEN="+workerToken, "OPLEDGER_WORKER_ID=worker-go-example",
			"PROVIDER_URL=http://"+s.sim)
		cmd.Stdin = strings.NewReader(in.String())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err = cmd.Output()
		require.NoError(t, err, stderr.String())
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m), l)
			lines = append(lines, m)
		}
		require.Len(t, lines, 3)
		require.Equal(t, []any{"Claimed", "Completed", "outcome", true}, []any{lines[0]["status"], lines[0]["outcome"], lines[0]["recorded"], lines[0]["ack"]})
		require.Equal(t, []any{"DuplicateDelivery", true}, []any{lines[1]["status"], lines[1]["ack"]})
		require.Equal(t, []any{"AlreadyConsumed", true, true}, []any{lines[2]["status"], lines[2]["replay_suspected"], lines[2]["ack"]})
		requests, created := s.simLedger(op)
		require.Equal(t, 1, requests)
		require.Equal(t, 1, created)
	})

	t.Run("a lease lost mid-call cancels the call; nothing more is sent", func(t *testing.T) {
		tick := newTicker(60 * time.Second)
		c := s.goClient(t, api, func(c *client.Config) { c.After = tick.after })
		w := &client.Worker{Client: c, Executor: refunds}
		op, capability := s.decide(t, "go-lost", 0)
		s.armFault(t, "hold-response", op) // the refund is made; its answer never comes
		done := make(chan client.Handled, 1)
		go func() {
			h, err := w.Handle(context.WithoutCancel(ctx), client.Message{MessageID: "MSG-GO-L1", OperationID: op, Capability: capability["token"].(string)})
			require.NoError(t, err)
			done <- h
		}()
		s.waitReceived(t, op, 1)
		require.Equal(t, 200, s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "2m"}).status)
		s.waitExecution(t, op, func(x map[string]any) bool { return x["lease_epoch"] == float64(2) }) // the sweeper lapsed it
		tick.fire(t)                                                                                  // the next renewal is refused
		var h client.Handled
		select {
		case h = <-done:
		case <-time.After(clientWaitBound):
			t.Fatal("the call was not cancelled when the lease was lost")
		}
		require.ErrorIs(t, h.LeaseLost, client.ErrLeaseLost)
		require.True(t, h.Executed)
		require.Equal(t, client.Unknown, h.Result.Outcome, h.Result.Detail)
		require.Contains(t, h.Result.Detail, "cancelled mid-request")
		require.Equal(t, client.NotRecorded, h.Recorded, "an Unknown result after the lease is lost is the reconciler's")
		requests, created := s.simLedger(op)
		require.Equal(t, 1, requests, "no resend after the lease was lost")
		require.Equal(t, 1, created)
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Unknown" })
	})

	t.Run("a definite result after the lease is lost is late evidence, and settles it", func(t *testing.T) {
		tick := newTicker(60 * time.Second)
		c := s.goClient(t, api, func(c *client.Config) { c.After = tick.after })
		executed := make(chan struct{})
		slow := client.ExecutorFunc(func(ctx context.Context, x *client.Execution) client.Result {
			r := refunds.Execute(ctx, x)
			close(executed)
			<-ctx.Done() // the answer is in hand, but the worker stalls until its lease is gone
			return r
		})
		w := &client.Worker{Client: c, Executor: slow}
		op, capability := s.decide(t, "go-late", 0)
		done := make(chan client.Handled, 1)
		go func() {
			h, err := w.Handle(context.WithoutCancel(ctx), client.Message{MessageID: "MSG-GO-LT1", OperationID: op, Capability: capability["token"].(string)})
			require.NoError(t, err)
			done <- h
		}()
		<-executed
		require.Equal(t, 200, s.call("POST", "/v1/test-clock", operatorToken, map[string]any{"advance": "2m"}).status)
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Unknown" })
		tick.fire(t)
		h := <-done
		require.ErrorIs(t, h.LeaseLost, client.ErrLeaseLost)
		require.Equal(t, client.Completed, h.Result.Outcome)
		require.Equal(t, client.RecordedLate, h.Recorded, "%v", h.RecordErr)
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Completed" })
		_, created := s.simLedger(op)
		require.Equal(t, 1, created)
	})

	t.Run("a 503 storm: the same outcome is sent again until recorded", func(t *testing.T) {
		proxy := newFaultProxy(t, s.api)
		c := s.goClient(t, proxy.srv.URL, func(c *client.Config) {
			c.RetryBackoff, c.RetryBackoffMax = 5*time.Millisecond, 20*time.Millisecond
		})
		w := &client.Worker{Client: c, Executor: refunds}
		op, capability := s.decide(t, "go-storm", 0)
		m := client.Message{MessageID: "MSG-GO-S1", OperationID: op, Capability: capability["token"].(string)}

		proxy.inject(map[string]int{"/v1/claims": 3}, nil)
		for range 3 { // the claim never reached serve: nothing executes, the message is not acknowledged
			_, err := w.Handle(ctx, m)
			require.ErrorIs(t, err, client.ErrStoreUnavailable)
		}
		requests, _ := s.simLedger(op)
		require.Zero(t, requests)

		proxy.inject(map[string]int{"/outcome": 7}, nil)
		h, err := w.Handle(ctx, m) // the queue redelivers
		require.NoError(t, err)
		require.Equal(t, client.Completed, h.Result.Outcome)
		require.Equal(t, client.RecordedOutcome, h.Recorded, "%v", h.RecordErr)
		sentBodies := proxy.bodies("/outcome")
		require.Len(t, sentBodies, 8, "seven 503s, then recorded")
		for _, b := range sentBodies {
			require.Equal(t, sentBodies[0], b, "the same epoch, secret and outcome every time")
		}
		requests, created := s.simLedger(op)
		require.Equal(t, 1, requests)
		require.Equal(t, 1, created)
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Completed" })
	})

	t.Run("a 503 after serve recorded it: the 409 that follows ends the sending", func(t *testing.T) {
		proxy := newFaultProxy(t, s.api)
		c := s.goClient(t, proxy.srv.URL, func(c *client.Config) {
			c.RetryBackoff, c.RetryBackoffMax = 5*time.Millisecond, 20*time.Millisecond
		})
		w := &client.Worker{Client: c, Executor: refunds}
		op, capability := s.decide(t, "go-storm-after", 0)
		proxy.inject(nil, map[string]int{"/outcome": 1})
		h, err := w.Handle(ctx, client.Message{MessageID: "MSG-GO-SA1", OperationID: op, Capability: capability["token"].(string)})
		require.NoError(t, err)
		require.Equal(t, client.Completed, h.Result.Outcome)
		require.Equal(t, client.NotRecorded, h.Recorded)
		require.ErrorIs(t, h.RecordErr, client.ErrOutcomeMayBeRecorded)
		require.ErrorIs(t, h.RecordErr, client.ErrExecutionNotUnknown, "late evidence for an execution already Completed")
		require.Len(t, proxy.bodies("/outcome"), 3, "the 503'd send, the one refused lease.lost, the late one refused: nothing after a 409")
		s.waitExecution(t, op, func(x map[string]any) bool { return x["state"] == "Completed" })
		_, created := s.simLedger(op)
		require.Equal(t, 1, created)
	})
}
