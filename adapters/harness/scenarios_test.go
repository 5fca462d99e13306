package harness_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore"
	"opledger/eventstore/postgres/pgtest"
)

// The execution scenarios of the seed article, on real Postgres and the
// provider simulator over HTTP. Every claim about effects is checked on the
// simulator's ledger, never on a status flag alone. Each scenario is a
// testX(t, backend) run here on Postgres and in kurrent_test.go on KurrentDB.

const op domain.OperationID = "OP-4471"

// backend opens the event store a scenario runs on.
type backend struct {
	// open returns an isolated store for one scenario, and a function
	// opening another instance over the same data with connections of its
	// own (a second pool, a second client).
	open func(t *testing.T) (store eventstore.Store, another func() eventstore.Store)
	// dead returns a store whose server cannot be reached.
	dead func(t *testing.T) eventstore.Store
}

// onPostgres is every scenario's home: a fresh schema on the test server.
var onPostgres = backend{
	open: func(t *testing.T) (eventstore.Store, func() eventstore.Store) {
		store := pgtest.OpenStore(t)
		return store, func() eventstore.Store { return pgtest.OpenMigrated(t, pgtest.URL(), store.Schema()) }
	},
	dead: deadStore,
}

type scenario struct {
	t       *testing.T
	ctx     context.Context
	w       *harness.World
	store   eventstore.Store
	another func() eventstore.Store
}

func newScenarioOn(t *testing.T, b backend, profile domain.ProviderProfile, attempts int) *scenario {
	t.Helper()
	t.Parallel()
	store, another := b.open(t)
	w, err := harness.New(harness.Options{Store: store, Profile: profile, ClientAttempts: attempts})
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return &scenario{t: t, ctx: t.Context(), w: w, store: store, another: another}
}

func (s *scenario) approve() harness.Refund {
	s.t.Helper()
	r, err := s.w.Approve(s.ctx, op, "ORD-8841", 12000)
	require.NoError(s.t, err)
	return r
}

func (s *scenario) worker(id string) *worker.Worker {
	s.t.Helper()
	wk, err := s.w.Worker(id)
	require.NoError(s.t, err)
	return wk
}

func (s *scenario) deliver(wk *worker.Worker, d worker.Delivery) worker.Result {
	s.t.Helper()
	res, err := wk.Handle(s.ctx, d)
	require.NoError(s.t, err)
	return res
}

// handled is what a worker's Handle returned.
type handled struct {
	res worker.Result
	err error
}

// handleAsync runs wk.Handle(d) on its own goroutine, as a worker still
// waiting on the provider would be.
func (s *scenario) handleAsync(wk *worker.Worker, d worker.Delivery) <-chan handled {
	done := make(chan handled, 1)
	go func() {
		res, err := wk.Handle(s.ctx, d)
		done <- handled{res, err}
	}()
	return done
}

// await waits for handleAsync's result; the delivery's result must have
// been recorded (no error).
func (s *scenario) await(done <-chan handled) worker.Result {
	s.t.Helper()
	h := <-done
	require.NoError(s.t, h.err)
	return h.res
}

func (s *scenario) arm(kind sim.FaultKind) {
	s.t.Helper()
	require.NoError(s.t, s.w.Sim.Arm(sim.Fault{Kind: kind}))
}

// ledger is the simulator's ledger for the scenario's operation.
func (s *scenario) ledger() sim.Counters { return s.w.Sim.Ledger().ByOperation[string(op)] }

func (s *scenario) state() *domain.Operation {
	s.t.Helper()
	st, err := s.w.State(s.ctx, op)
	require.NoError(s.t, err)
	return st
}

func (s *scenario) evidence(reason domain.Reason) []domain.PresentationRejected {
	s.t.Helper()
	all, err := s.w.Evidence(s.ctx, op)
	require.NoError(s.t, err)
	var out []domain.PresentationRejected
	for _, e := range all {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// sweep runs the sweeper until it lapses something, for a bounded time: the
// index follows the global log, which shows an event only once every
// transaction that could precede it has ended (other tests' included), so a
// candidate may need a few rounds to appear. It returns 0 if nothing was
// lapsed by then, which the caller may expect.
func (s *scenario) sweep() int {
	s.t.Helper()
	return untilNonZero(s.t, func() int {
		n, err := s.w.Sweeper.SweepOnce(s.ctx)
		require.NoError(s.t, err)
		return n
	})
}

// reconcile runs the reconciler until it examines something (bounded, as sweep).
func (s *scenario) reconcile() []string {
	s.t.Helper()
	var out []string
	untilNonZero(s.t, func() int {
		steps, err := s.w.Reconciler.ReconcileOnce(s.ctx)
		require.NoError(s.t, err)
		for _, st := range steps {
			out = append(out, string(st.Verdict))
		}
		return len(steps)
	})
	return out
}

// untilNonZero calls f until it returns non-zero, at most 200 times 10ms
// apart, and returns the last result.
func untilNonZero(t *testing.T, f func() int) int {
	t.Helper()
	for range 200 {
		if n := f(); n != 0 {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}

// 1. A replayed capability (new message id, inside the 24 h window) is
// rejected before it reaches the provider.
func TestReplayedCapabilityRejectedBeforeProvider(t *testing.T) {
	testReplayedCapabilityRejectedBeforeProvider(t, onPostgres)
}

func testReplayedCapabilityRejectedBeforeProvider(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	a := s.worker("worker-a")
	first := s.deliver(a, r.Delivery("MSG-55A"))
	require.Equal(t, domain.StatusClaimed, first.Claim.Status)
	require.Equal(t, domain.Completed, first.Outcome)

	replay := s.deliver(a, r.Delivery("MSG-77C"))
	require.Equal(t, domain.StatusAlreadyConsumed, replay.Claim.Status)
	require.False(t, replay.Executed)

	require.Equal(t, 1, s.ledger().RequestsReceived, "the replay never reached the provider")
	require.Equal(t, 1, s.ledger().RefundsCreated)
	ev := s.evidence(domain.ReasonCapabilityAlreadyConsumed)
	require.Len(t, ev, 1)
	require.Equal(t, domain.MessageID("MSG-77C"), ev[0].MessageID)
	require.Equal(t, r.Capability, ev[0].CapabilityID)
	require.False(t, ev[0].ExecutionAttempted)
	require.True(t, ev[0].ReplaySuspected)
}

// 2. The same replay 25 h later, after the simulator pruned the key.
func TestReplayAfterProviderPrunedKeyCannotRefundAgain(t *testing.T) {
	testReplayAfterProviderPrunedKeyCannotRefundAgain(t, onPostgres)
}

func testReplayAfterProviderPrunedKeyCannotRefundAgain(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	a := s.worker("worker-a")
	s.deliver(a, r.Delivery("MSG-55A"))
	s.w.Clock.Advance(25 * time.Hour)
	replay := s.deliver(a, r.Delivery("MSG-77C"))
	require.Equal(t, domain.StatusAlreadyConsumed, replay.Claim.Status)
	require.Equal(t, 1, s.ledger().RefundsCreated)
	require.Equal(t, 1, s.ledger().RequestsReceived)
}

// 3. Response lost after commit: Unknown, capability consumed, and a
// redelivery sends nothing.
func TestLostResponseIsUnknownAndRedeliveryDoesNotResend(t *testing.T) {
	testLostResponseIsUnknownAndRedeliveryDoesNotResend(t, onPostgres)
}

func testLostResponseIsUnknownAndRedeliveryDoesNotResend(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	s.arm(sim.FaultLoseResponseAfterCommit)
	a := s.worker("worker-a")
	res := s.deliver(a, r.Delivery("MSG-55A"))
	require.Equal(t, domain.Unknown, res.Outcome)
	require.Equal(t, "outcome", res.Recorded)

	again := s.deliver(a, r.Delivery("MSG-55A")) // broker redelivery
	require.Equal(t, domain.StatusDuplicateDelivery, again.Claim.Status)
	require.False(t, again.Executed)

	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Equal(t, 1, s.ledger().RefundsCreated)
	st := s.state()
	require.Equal(t, domain.OpUnknown, st.Status())
	require.Equal(t, domain.CapConsumed, st.Capabilities[r.Capability].State)
}

// 4. A duplicate delivery while worker A still waits on a held response
// leaves the execution Executing; releasing it ends Completed, one request.
func TestDuplicateWhileHeldLeavesExecuting(t *testing.T) {
	testDuplicateWhileHeldLeavesExecuting(t, onPostgres)
}

func testDuplicateWhileHeldLeavesExecuting(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	s.arm(sim.FaultHoldResponse)
	a, b := s.worker("worker-a"), s.worker("worker-b")

	done := s.handleAsync(a, r.Delivery("MSG-55A"))
	<-s.w.Sim.Held()
	dup := s.deliver(b, r.Delivery("MSG-55A")) // the lock lapsed; redelivered to worker B
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Claim.Status)
	require.Equal(t, domain.ExecExecuting, dup.Claim.ExecutionState)
	require.Equal(t, domain.OpExecuting, s.state().Status())

	require.Equal(t, 1, s.w.Sim.Release())
	res := s.await(done)
	require.Equal(t, "outcome", res.Recorded)
	require.Equal(t, domain.OpCompleted, s.state().Status())
	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Equal(t, 1, s.ledger().RefundsCreated)
}

// 5. A second valid capability while the outcome is Unknown opens nothing.
func TestSecondCapabilityWhileUnknownOpensNothing(t *testing.T) {
	testSecondCapabilityWhileUnknownOpensNothing(t, onPostgres)
}

func testSecondCapabilityWhileUnknownOpensNothing(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	s.arm(sim.FaultLoseResponseAfterCommit)
	a := s.worker("worker-a")
	s.deliver(a, r.Delivery("MSG-55A"))

	second, err := s.w.IssueCapability(s.ctx, op) // someone reissues authority instead of reconciling
	require.NoError(t, err)
	res := s.deliver(a, harness.Refund{Operation: op, Capability: second}.Delivery("MSG-56B"))
	require.Equal(t, domain.StatusOperationNotExecutable, res.Claim.Status)
	require.False(t, res.Executed)

	require.Equal(t, 1, s.ledger().RefundsCreated)
	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Len(t, s.evidence(domain.ReasonOperationOutcomeUnknown), 1)
	require.Equal(t, domain.CapIssued, s.state().Capabilities[second].State)
}

// 6. The whole Thursday timeline and Friday's resubmission end with exactly
// one refund, for both provider profiles.
func TestThursdayAndFriday(t *testing.T) {
	testThursdayAndFriday(t, onPostgres)
}

func testThursdayAndFriday(t *testing.T, on backend) {
	for _, profile := range []domain.ProviderProfile{provider.StripeV1, provider.StripeV2, provider.Meridian} {
		t.Run(profile.Name, func(t *testing.T) {
			s := newScenarioOn(t, on, profile, 1)
			at := func(hms string) {
				t.Helper()
				target, err := time.Parse(time.DateTime, "2026-11-26 "+hms)
				require.NoError(t, err)
				s.w.Clock.Advance(target.Sub(s.w.Clock.Now()))
				require.Equal(t, target.UTC(), s.w.Clock.Now())
			}
			// 14:02:10 the agent approves OP-4471 (DEC, CAP, single use, 15 min).
			r := s.approve()
			// 14:02:13 worker A claims and sends; the refund is created, the
			// response never arrives, and the process is recycled.
			at("14:02:13")
			s.arm(sim.FaultLoseResponseAfterCommit)
			wa, err := worker.New(worker.Config{ID: "worker-a", Ledger: harness.CrashAfterClaim{Ledger: s.w.Ledger}, Provider: s.w.Provider,
				Clock: s.w.Clock, After: s.w.WorkerTimers.After})
			require.NoError(t, err)
			a := s.deliver(wa, r.Delivery("MSG-55A"))
			require.Equal(t, domain.StatusClaimed, a.Claim.Status)
			require.Empty(t, a.Recorded, "nothing is recorded after the claim")
			require.Equal(t, domain.OpExecuting, s.state().Status())
			// 14:02:44 the queue redelivers MSG-55A to worker B.
			at("14:02:44")
			b := s.deliver(s.worker("worker-b"), r.Delivery("MSG-55A"))
			require.Equal(t, domain.StatusDuplicateDelivery, b.Claim.Status)
			require.Equal(t, domain.OpExecuting, s.state().Status(), "a duplicate never infers the outcome")
			// 14:03:00 the sweeper finds the lease still running.
			at("14:03:00")
			n, err := s.w.Sweeper.SweepOnce(s.ctx)
			require.NoError(t, err)
			require.Zero(t, n)
			// 14:03:40 the lease has lapsed: the sweeper marks EXE-1 Unknown.
			at("14:03:40")
			require.Equal(t, 1, s.sweep())
			st := s.state()
			require.Equal(t, domain.OpUnknown, st.Status())
			require.Equal(t, int64(2), st.Executions[0].LeaseEpoch)
			// 14:05 reconciliation finds the refund (by OP-4471, or for Meridian
			// by the execution's key): Completed; nothing resent.
			at("14:05:00")
			require.Equal(t, []string{"completed"}, s.reconcile())
			require.Equal(t, domain.OpCompleted, s.state().Status())
			// Friday 15:30: "resubmit all" sends a copy of MSG-55A under a new id.
			s.w.Clock.Advance(25*time.Hour + 25*time.Minute)
			f := s.deliver(s.worker("worker-c"), r.Delivery("MSG-9F1"))
			require.Equal(t, domain.StatusAlreadyConsumed, f.Claim.Status)
			require.True(t, f.Claim.ReplaySuspected)

			l := s.ledger()
			require.Equal(t, 1, l.RefundsCreated, "exactly one refund")
			require.Equal(t, 1, l.RequestsReceived, "nothing was resent")
			require.GreaterOrEqual(t, l.Lookups, 1)
		})
	}
}

// 7. Racing deliveries from two worker instances with separate pools (or
// clients): one claim, one request.
func TestRacingWorkersSeparatePools(t *testing.T) {
	testRacingWorkersSeparatePools(t, onPostgres)
}

func testRacingWorkersSeparatePools(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	other := s.another()
	h2, err := ledger.New(ledger.Config{Store: other, Clock: s.w.Clock})
	require.NoError(t, err)
	a := s.worker("worker-a")
	b, err := worker.New(worker.Config{ID: "worker-b", Ledger: h2, Provider: s.w.Provider, Clock: s.w.Clock, After: s.w.WorkerTimers.After})
	require.NoError(t, err)

	var wg sync.WaitGroup
	results := make([]worker.Result, 4)
	errs := make([]error, 4)
	msgs := []domain.MessageID{"MSG-55A", "MSG-55A", "MSG-77C", "MSG-77C"}
	for i, wk := range []*worker.Worker{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = wk.Handle(s.ctx, r.Delivery(msgs[i]))
		}()
	}
	wg.Wait()
	executed := 0
	for i := range results {
		require.NoError(t, errs[i])
		if results[i].Executed {
			executed++
		}
	}
	require.Equal(t, 1, executed)
	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Equal(t, 1, s.ledger().RefundsCreated)
	require.Len(t, s.state().Executions, 1)
}

// 9a. Lease fencing: after the sweeper took over, the old worker's late
// result is refused as an outcome and resolves only its own Unknown.
func TestStaleWorkerLateResultResolvesOnlyItsOwnExecution(t *testing.T) {
	testStaleWorkerLateResultResolvesOnlyItsOwnExecution(t, onPostgres)
}

func testStaleWorkerLateResultResolvesOnlyItsOwnExecution(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	s.arm(sim.FaultHoldResponse)
	a := s.worker("worker-a")
	done := s.handleAsync(a, r.Delivery("MSG-55A"))
	<-s.w.Sim.Held()
	s.w.Clock.Advance(domain.DefaultLeaseDuration + time.Second) // A's renewal timer never fired
	require.Equal(t, 1, s.sweep())
	require.Equal(t, 1, s.w.Sim.Release()) // A finally gets its answer
	res := s.await(done)
	require.Equal(t, domain.Completed, res.Outcome)
	require.Equal(t, "late-outcome", res.Recorded, "the epoch-1 outcome was refused; only late evidence was accepted")
	st := s.state()
	require.Equal(t, domain.ExecCompleted, st.Executions[0].State)
	require.Equal(t, int64(2), st.Executions[0].LeaseEpoch, "ownership was not restored")
	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Equal(t, 1, s.ledger().RefundsCreated)
}

// 9b. Lease fencing: once the lease is lost, the old worker starts no further
// request, retries included.
func TestLostLeaseStopsFurtherSends(t *testing.T) {
	testLostLeaseStopsFurtherSends(t, onPostgres)
}

func testLostLeaseStopsFurtherSends(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 3)
	r := s.approve()
	s.arm(sim.Fault5xxBeforeCommit) // the first send fails ambiguously; the client will want to resend
	a := s.worker("worker-a")
	done := s.handleAsync(a, r.Delivery("MSG-55A"))
	// The client is in its back-off and the worker's renewal timer is set.
	require.NoError(t, s.w.ClientTimers.WaitPending(s.ctx, 1))
	require.NoError(t, s.w.WorkerTimers.WaitPending(s.ctx, 1))
	s.w.Clock.Advance(domain.DefaultLeaseDuration + time.Second)
	require.Equal(t, 1, s.sweep()) // the sweeper takes over: epoch 2
	s.w.WorkerTimers.Fire()        // A tries to renew, is refused lease.lost, cancels its calls
	res := s.await(done)
	require.Equal(t, domain.Unknown, res.Outcome)
	require.Empty(t, res.Recorded, "an Unknown from a stale worker is not recorded")
	require.Equal(t, 1, s.ledger().RequestsReceived, "no further request after the lease was lost")
	s.w.ClientTimers.Fire() // a back-off timer firing now starts nothing either
	require.Equal(t, 1, s.ledger().RequestsReceived)
	require.Equal(t, domain.OpUnknown, s.state().Status())
}

// 10. The key is identical on every resend within an attempt, client retries
// included.
func TestKeyIdenticalOnEveryResend(t *testing.T) {
	testKeyIdenticalOnEveryResend(t, onPostgres)
}

func testKeyIdenticalOnEveryResend(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 3)
	r := s.approve()
	s.arm(sim.FaultLoseResponseAfterCommit)
	a := s.worker("worker-a")
	done := s.handleAsync(a, r.Delivery("MSG-55A"))
	require.NoError(t, s.w.ClientTimers.WaitPending(s.ctx, 1))
	s.w.ClientTimers.Fire() // end the back-off: the client resends
	res := s.await(done)
	require.Equal(t, domain.Completed, res.Outcome)
	reqs := s.w.Sim.Ledger().Requests
	require.Len(t, reqs, 2)
	for _, q := range reqs {
		require.Equal(t, "refund-OP-4471-a1", q.IdempotencyKey)
	}
	require.True(t, reqs[1].Replayed)
	require.Equal(t, 1, s.ledger().RefundsCreated)
}

// 11. Reconciliation that proves NotApplied allows attempt 2 only with a new
// decision; with facts changed against it, no capability and no request.
func TestNotAppliedThenNewDecision(t *testing.T) {
	testNotAppliedThenNewDecision(t, onPostgres)
}

func testNotAppliedThenNewDecision(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	s.arm(sim.FaultDropConnectionBeforeRead) // bytes written, no answer: Unknown
	a := s.worker("worker-a")
	require.Equal(t, domain.Unknown, s.deliver(a, r.Delivery("MSG-1")).Outcome)
	s.arm(sim.FaultRejectValidation) // the reconciler's resend is rejected before execution
	require.Equal(t, []string{"not-applied"}, s.reconcile())
	require.Equal(t, domain.OpNotApplied, s.state().Status())
	require.Equal(t, 0, s.ledger().RefundsCreated)
	requests := s.ledger().RequestsReceived

	// Facts changed while reconciling: a chargeback was opened.
	denied, err := s.w.Reauthorize(s.ctx, op, domain.Facts{OrderRefundable: true, ChargebackOpen: true})
	require.NoError(t, err)
	require.Equal(t, domain.Denied, denied.Decision.Verdict)
	require.Empty(t, denied.Capability)
	// The old capability cannot start anything.
	res := s.deliver(a, r.Delivery("MSG-2"))
	require.Equal(t, domain.StatusAlreadyConsumed, res.Claim.Status)
	require.Equal(t, requests, s.ledger().RequestsReceived, "no request")

	// With current facts allowing it: attempt 2, new capability, new key.
	again, err := s.w.Reauthorize(s.ctx, op, domain.Facts{OrderRefundable: true})
	require.NoError(t, err)
	require.Equal(t, 2, again.Decision.Attempt)
	res = s.deliver(a, again.Delivery("MSG-3"))
	require.Equal(t, domain.Completed, res.Outcome)
	reqs := s.w.Sim.Ledger().Requests
	require.Equal(t, "refund-OP-4471-a2", reqs[len(reqs)-1].IdempotencyKey)
	require.Equal(t, 1, s.ledger().RefundsCreated)
}

// 12. Store unreachable at claim time: no request reaches the provider.
func TestStoreUnreachableNoRequest(t *testing.T) {
	testStoreUnreachableNoRequest(t, onPostgres)
}

func testStoreUnreachableNoRequest(t *testing.T, on backend) {
	s := newScenarioOn(t, on, provider.StripeV1, 1)
	r := s.approve()
	dead := on.dead(t)
	h, err := ledger.New(ledger.Config{Store: dead, Clock: s.w.Clock, MaxAppendRetries: 1, AppendRetryBackoff: time.Millisecond})
	require.NoError(t, err)
	wk, err := worker.New(worker.Config{ID: "worker-a", Ledger: h, Provider: s.w.Provider, Clock: s.w.Clock, After: s.w.WorkerTimers.After})
	require.NoError(t, err)
	_, err = wk.Handle(s.ctx, r.Delivery("MSG-55A"))
	require.ErrorIs(t, err, eventstore.ErrUnavailable, "the transport must not acknowledge")
	require.Equal(t, 0, s.ledger().RequestsReceived)
	require.Equal(t, domain.CapIssued, s.state().Capabilities[r.Capability].State, "nothing assumed consumed")
}
