package recovery_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
)

// profiles are the built-in profiles whose provider can be asked by our
// reference; the Meridian profile (retrieve by key) has tests of its own.
var profiles = []domain.ProviderProfile{provider.StripeV1, provider.StripeV2}

// verdicts maps a round's steps by operation.
func verdicts(steps []recovery.Step) map[domain.OperationID]recovery.Verdict {
	out := map[domain.OperationID]recovery.Verdict{}
	for _, s := range steps {
		out[s.Ref.OperationID] = s.Verdict
	}
	return out
}

// reconciled returns x's Reconciled event.
func (f *fixture) reconciled(op domain.OperationID) domain.Reconciled {
	f.t.Helper()
	for _, e := range f.events(op) {
		if r, ok := e.(domain.Reconciled); ok {
			return r
		}
	}
	f.t.Fatalf("%s has no Reconciled event", op)
	return domain.Reconciled{}
}

// The resend branch, inside the profile's key retention: the provider has
// no refund for the operation (the worker died after its claim, before it
// sent anything), so the reconciler resends under the original key; the
// simulator's ledger shows exactly that one request and one refund.
func TestReconcilerResendsUnderTheOriginalKeyWhenNothingWasSent(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		t.Run(profile.Name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{profile: profile})
			c := f.unknown("OP-1")["OP-1"]
			steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictCompleted}, verdicts(steps))

			got := f.simCounters("OP-1")
			require.Equal(t, 1, got.RequestsReceived)
			require.Equal(t, 1, got.RefundsCreated)
			reqs := f.simRequests("OP-1")
			require.Len(t, reqs, 1)
			require.Equal(t, string(c.IdempotencyKey), reqs[0].IdempotencyKey, "resent under the original key")
			r := f.reconciled("OP-1")
			require.Equal(t, domain.MethodProviderResend, r.Method)
			require.Equal(t, reqs[0].RefundID, r.ProviderReference)
			require.Equal(t, domain.ExecCompleted, f.execution("OP-1", c.ExecutionID).State)
		})
	}
}

// The resend branch when the first request had been executed and only its
// response was lost, and the provider's search has not caught up (it finds
// nothing): the resend under the original key is answered from the key's
// saved result, so the simulator's ledger still shows one refund.
func TestReconcilerResendIsDeduplicatedByTheProvider(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		t.Run(profile.Name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{profile: profile})
			c := f.executing("OP-1")
			state := f.state("OP-1")
			require.NoError(t, f.sim.Arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: "OP-1"}))
			first := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-1", OrderID: state.OrderID,
				AmountMinor: state.AmountMinor, Currency: state.Currency, IdempotencyKey: c.IdempotencyKey})
			require.Equal(t, domain.Unknown, first.Outcome, "the response was lost")
			require.Equal(t, 1, f.simCounters("OP-1").RefundsCreated)
			f.expire()
			f.lapse("OP-1", c.ExecutionID)

			r := f.reconciler(func(cfg *recovery.ReconcilerConfig) { cfg.Provider = laggingLookup{f.client} })
			steps, err := r.ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictCompleted}, verdicts(steps))

			got := f.simCounters("OP-1")
			require.Equal(t, 1, got.RefundsCreated, "at most one refund for the operation")
			require.Equal(t, 2, got.RequestsReceived)
			reqs := f.simRequests("OP-1")
			require.Len(t, reqs, 2)
			require.Equal(t, reqs[0].IdempotencyKey, reqs[1].IdempotencyKey)
			require.Equal(t, string(c.IdempotencyKey), reqs[1].IdempotencyKey)
			require.True(t, reqs[1].Replayed, "the provider answered the resend from the key")
			require.Equal(t, reqs[0].RefundID, f.reconciled("OP-1").ProviderReference, "the one refund")
		})
	}
}

// Past the key retention a resend could refund again: the reconciler
// escalates, and the simulator's ledger shows no request from it.
func TestReconcilerEscalatesPastTheKeyRetentionWithoutSending(t *testing.T) {
	t.Parallel()
	for _, profile := range profiles {
		t.Run(profile.Name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{profile: profile})
			c := f.unknown("OP-1")["OP-1"]
			f.clock.Advance(profile.KeyRetention)
			steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictEscalated}, verdicts(steps))
			require.Equal(t, domain.ExecEscalated, f.execution("OP-1", c.ExecutionID).State)
			got := f.simCounters("OP-1")
			require.Zero(t, got.RequestsReceived, "no request sent")
			require.Zero(t, got.RefundsCreated)
			require.Equal(t, 1, got.Lookups, "it did ask")
		})
	}
}

// A lookup that keeps failing is inconclusive MaxInconclusive-1 times, then
// escalated, never resent; its hostile text (NUL, control and bidi
// characters, far too long) is kept escaped and cut, so the escalation
// itself is never refused.
func TestReconcilerEscalatesALookupThatKeepsFailing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := f.unknown("OP-1")["OP-1"]
	hostile := "upstream said \x00\x1b[31m\u202e" + strings.Repeat("x", 3*domain.MaxTextLength)
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) { cfg.Provider = failingLookup{f.client, hostile} })
	for round := 1; round <= 3; round++ {
		steps, err := r.ReconcileOnce(f.ctx)
		require.NoError(t, err)
		want := recovery.VerdictInconclusive
		if round == 3 {
			want = recovery.VerdictEscalated
		}
		require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": want}, verdicts(steps), "round %d", round)
	}
	require.Equal(t, domain.ExecEscalated, f.execution("OP-1", c.ExecutionID).State)
	require.Zero(t, f.simCounters("OP-1").RequestsReceived, "never resent blindly")
	var esc domain.Escalated
	for _, e := range f.events("OP-1") {
		if x, ok := e.(domain.Escalated); ok {
			esc = x
		}
	}
	require.Contains(t, esc.Detail, `\x00`)
	require.Contains(t, esc.Detail, `\u202e`)
	require.LessOrEqual(t, len(esc.Detail), domain.MaxTextLength)
	require.Nil(t, domain.CheckText("detail", esc.Detail, domain.MaxTextLength, false))
	require.Empty(t, f.seen.items, "inconclusive is not a failure")
}

// A provider reference the ledger cannot record (a NUL in it) is escalated
// with the reference escaped, rather than failing the step.
func TestReconcilerEscalatesAnUnrecordableProviderReference(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	c := f.unknown("OP-1")["OP-1"]
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.Provider = fixedLookup{f.client, []domain.ProviderEffect{{Reference: "re_\x00evil", OperationID: "OP-1",
			IdempotencyKey: c.IdempotencyKey, State: domain.EffectApplied}}}
	})
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictEscalated}, verdicts(steps))
	require.Equal(t, domain.ExecEscalated, f.execution("OP-1", c.ExecutionID).State)
	require.Empty(t, f.seen.items)
}

// One operation whose stream is longer than the handler loads, among
// healthy Unknown ones: the healthy ones are reconciled in the same round
// (resent under their key, one refund each); the poisoned one fails
// MaxAttempts times, then is set aside with its reason, and the provider
// never heard of it.
func TestReconcilerGoesOnPastAPoisonedOperation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{maxStreamEvents: 30})
	healthy := []domain.OperationID{"OP-H1", "OP-H2", "OP-H3"}
	claims := f.unknown(append([]domain.OperationID{"OP-P"}, healthy...)...)
	f.overLong("OP-P", 40)
	r := f.reconciler(nil)
	poisoned := string(claims["OP-P"].ExecutionID)

	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err, "one item's failure is not the round's")
	v := verdicts(steps)
	require.Equal(t, recovery.VerdictFailed, v["OP-P"])
	for _, op := range healthy {
		require.Equal(t, recovery.VerdictCompleted, v[op], op)
		require.Equal(t, 1, f.simCounters(op).RefundsCreated, op)
		require.Equal(t, domain.ExecCompleted, f.execution(op, claims[op].ExecutionID).State, op)
	}
	for attempt := 2; attempt <= testPolicy.MaxAttempts; attempt++ {
		steps, err := r.ReconcileOnce(f.ctx)
		require.NoError(t, err)
		require.Empty(t, steps, "backing off: not examined")
		f.clock.Advance(testPolicy.MaxBackoff)
		steps, err = r.ReconcileOnce(f.ctx)
		require.NoError(t, err)
		require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-P": recovery.VerdictFailed}, verdicts(steps))
	}
	listed := f.setAside(setaside.RoleReconciler)
	require.Len(t, listed, 1)
	require.Equal(t, poisoned, listed[0].Item)
	require.Equal(t, domain.OperationID("OP-P"), listed[0].OperationID)
	require.Equal(t, recovery.ReasonItemError, listed[0].Reason)
	require.Contains(t, listed[0].Detail, "longer than 30 events")
	require.Equal(t, testPolicy.MaxAttempts, listed[0].Attempts)
	f.clock.Advance(time.Hour)
	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Empty(t, steps, "set aside: not examined again")
	require.Zero(t, f.simCounters("OP-P").Lookups+f.simCounters("OP-P").RequestsReceived, "the provider never heard of it")
}

// More failing Unknown executions than one batch, all older than a healthy
// one: the walk reaches the healthy one within ceil((failing+1)/batch)
// rounds.
func TestReconcilerIsNotStarvedByFailingCandidates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const batch, failing = 2, 5
	var claims []*domain.Claimed
	for i := range failing {
		op := domain.OperationID(fmt.Sprintf("OP-P%d", i))
		c := f.executing(op)
		f.expire()
		f.lapse(op, c.ExecutionID)
		f.corrupt(op)
		claims = append(claims, c)
	}
	h := f.unknown("OP-H")["OP-H"]
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) { cfg.BatchSize = batch })
	for rounds := 1; f.execution("OP-H", h.ExecutionID).State != domain.ExecCompleted; rounds++ {
		require.LessOrEqual(t, rounds, (failing+1+batch-1)/batch, "the healthy candidate was starved")
		_, err := r.ReconcileOnce(f.ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1, f.simCounters("OP-H").RefundsCreated)
	for _, c := range claims {
		it, found := f.item(setaside.RoleReconciler, string(c.ExecutionID))
		require.True(t, found, c.ExecutionID)
		require.Equal(t, recovery.ReasonStreamCorrupt, it.Reason)
	}
}

// Run calls OnRound around each round: the round runs on the context it
// returns, and the function it returns gets the round's steps.
func TestReconcilerRunReportsEachRound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	f.unknown("OP-1")
	type key struct{}
	rounds := make(chan []recovery.Step, 1)
	ctx, cancel := context.WithCancel(f.ctx)
	var sawRound bool
	r := f.reconciler(func(c *recovery.ReconcilerConfig) {
		c.Interval = time.Hour
		c.OnRound = func(ctx context.Context) (context.Context, func([]recovery.Step, error)) {
			return context.WithValue(ctx, key{}, "round"), func(steps []recovery.Step, err error) {
				require.NoError(t, err)
				rounds <- steps
				cancel() // one round is enough
			}
		}
		c.Provider = roundProvider{Provider: f.client, saw: &sawRound, key: key{}}
	})
	require.ErrorIs(t, r.Run(ctx), context.Canceled)
	steps := <-rounds
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictCompleted}, verdicts(steps))
	require.True(t, sawRound, "the provider was asked on the round's context")
}

// roundProvider notes whether a lookup ran on a context carrying key.
type roundProvider struct {
	domain.Provider
	saw *bool
	key any
}

func (p roundProvider) LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	*p.saw = *p.saw || ctx.Value(p.key) != nil
	return p.Provider.LookupByReference(ctx, op)
}

func (p roundProvider) RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	*p.saw = *p.saw || ctx.Value(p.key) != nil
	return p.Provider.RetrieveByKey(ctx, key)
}

func (p roundProvider) CreateRefund(ctx context.Context, req domain.RefundRequest) domain.RefundResult {
	*p.saw = *p.saw || ctx.Value(p.key) != nil
	return p.Provider.CreateRefund(ctx, req)
}
