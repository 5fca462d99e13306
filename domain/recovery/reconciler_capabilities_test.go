package recovery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/recovery"
)

// The reconciler decides from the profile's capabilities. Meridian has no
// lookup by our reference but a retrieve by idempotency key; a profile with
// neither read can only escalate. Every claim is checked on the simulator's
// ledger: what it received, created and was asked.

// lostResponse claims op, sends its refund with fault armed (the worker
// then dies before recording anything), and lets the lease lapse: Unknown.
func (f *fixture) lostResponse(op domain.OperationID, fault sim.FaultKind) (*domain.Claimed, domain.RefundResult) {
	f.t.Helper()
	c := f.executing(op)
	state := f.state(op)
	require.NoError(f.t, f.sim.Arm(sim.Fault{Kind: fault, OperationID: string(op)}))
	res := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: op, OrderID: state.OrderID,
		AmountMinor: state.AmountMinor, Currency: state.Currency, IdempotencyKey: c.IdempotencyKey})
	f.expire()
	f.lapse(op, c.ExecutionID)
	return c, res
}

func TestReconcilerOnMeridianFindsALostResponseByKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{profile: provider.Meridian})
	c, first := f.lostResponse("OP-1", sim.FaultLoseResponseAfterCommit)
	require.Equal(t, domain.Unknown, first.Outcome, "the response was lost")

	steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictCompleted}, verdicts(steps))
	got := f.simCounters("OP-1")
	require.Equal(t, 1, got.RequestsReceived, "nothing was resent")
	require.Equal(t, 1, got.RefundsCreated)
	require.Equal(t, 1, got.Lookups, "one retrieve by key")
	r := f.reconciled("OP-1")
	require.Equal(t, domain.MethodProviderLookup, r.Method)
	require.Equal(t, f.simRequests("OP-1")[0].RefundID, r.ProviderReference)
	require.Contains(t, r.Evidence, "retrieved by idempotency key")
	require.Equal(t, domain.ExecCompleted, f.execution("OP-1", c.ExecutionID).State)
}

// Nothing under the key (the worker died before sending, or its request
// failed without effect): inside the 7-day retention Meridian documents a
// resend under the same key as safe, so the reconciler resends, once.
func TestReconcilerOnMeridianResendsWhenNothingIsUnderTheKey(t *testing.T) {
	t.Parallel()
	for _, fault := range []sim.FaultKind{"", sim.Fault5xxBeforeCommit} {
		t.Run("fault "+string(fault), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{profile: provider.Meridian})
			var c *domain.Claimed
			sentBefore := 0
			if fault == "" {
				c = f.unknown("OP-1")["OP-1"]
			} else {
				c, _ = f.lostResponse("OP-1", fault)
				sentBefore = 1
			}
			steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictCompleted}, verdicts(steps))
			got := f.simCounters("OP-1")
			require.Equal(t, sentBefore+1, got.RequestsReceived, "one resend")
			require.Equal(t, 1, got.RefundsCreated)
			reqs := f.simRequests("OP-1")
			require.Equal(t, string(c.IdempotencyKey), reqs[len(reqs)-1].IdempotencyKey, "under the original key")
			require.Equal(t, domain.MethodProviderResend, f.reconciled("OP-1").Method)
		})
	}
}

func TestReconcilerOnMeridianDeclinedIsNotApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{profile: provider.Meridian})
	c, _ := f.lostResponse("OP-1", sim.FaultDecline)
	steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictNotApplied}, verdicts(steps))
	got := f.simCounters("OP-1")
	require.Equal(t, 1, got.RequestsReceived, "nothing resent")
	require.Zero(t, got.RefundsCreated)
	require.Equal(t, 1, got.RefundsDeclined)
	require.Contains(t, f.reconciled("OP-1").Evidence, "DECLINED")
	require.Equal(t, domain.ExecNotApplied, f.execution("OP-1", c.ExecutionID).State)
}

// Past Meridian's retention "none under the key" may only mean the key was
// pruned: a resend could refund again, so the reconciler escalates without
// sending.
func TestReconcilerOnMeridianPastTheRetentionEscalatesWithoutSending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{profile: provider.Meridian})
	c := f.unknown("OP-1")["OP-1"]
	f.clock.Advance(provider.Meridian.KeyRetention)
	steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictEscalated}, verdicts(steps))
	require.Equal(t, domain.ExecEscalated, f.execution("OP-1", c.ExecutionID).State)
	require.Zero(t, f.sim.Ledger().RequestsReceived, "no request sent")
	require.Equal(t, 1, f.sim.Ledger().Lookups, "it did ask")
}

// A profile without any read: the reconciler cannot tell, so it escalates at
// once and the provider hears nothing from it: no lookup, no request.
func TestReconcilerWithoutAnyReadEscalatesAndSendsNothing(t *testing.T) {
	t.Parallel()
	blind := provider.StripeV1
	blind.Name, blind.ReferenceField = "stripe-unsearchable", ""
	f := newFixture(t, fixtureOptions{profile: blind})
	claims := f.unknown("OP-1", "OP-2")
	steps, err := f.reconciler(nil).ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, map[domain.OperationID]recovery.Verdict{"OP-1": recovery.VerdictEscalated, "OP-2": recovery.VerdictEscalated}, verdicts(steps))
	require.Equal(t, sim.Counters{}, f.sim.Ledger().Counters, "zero requests and zero lookups")
	for op, c := range claims {
		require.Equal(t, domain.ExecEscalated, f.execution(op, c.ExecutionID).State)
	}
	var esc domain.Escalated
	for _, e := range f.events("OP-1") {
		if x, ok := e.(domain.Escalated); ok {
			esc = x
		}
	}
	require.Contains(t, esc.Detail, "cannot tell")
	require.Contains(t, esc.Detail, "stripe-unsearchable")
}

func TestReconcilerOnMeridianRetrieveThatKeepsFailingEscalates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{profile: provider.Meridian})
	c := f.unknown("OP-1")["OP-1"]
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.Provider = failingLookup{f.client, "HTTP 503 SERVICE_UNAVAILABLE"}
	})
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
	require.Zero(t, f.sim.Ledger().RequestsReceived, "never resent blindly")
}

// What a retrieve can answer besides applied, not applied and none: in
// progress or an undocumented state (asked again, then escalated), and an
// effect that does not match the operation (escalated at once). Nothing is
// ever sent.
func TestReconcilerOnMeridianUnsettledOrForeignEffects(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		effect func(domain.IdempotencyKey) domain.ProviderEffect
		want   []recovery.Verdict
		detail string
	}{
		{"in progress", func(k domain.IdempotencyKey) domain.ProviderEffect {
			return domain.ProviderEffect{Reference: "mrr_1", IdempotencyKey: k, State: domain.EffectInProgress, Detail: `status "PROCESSING"`}
		}, []recovery.Verdict{recovery.VerdictInconclusive, recovery.VerdictInconclusive, recovery.VerdictEscalated}, "in-progress"},
		{"undocumented state", func(k domain.IdempotencyKey) domain.ProviderEffect {
			return domain.ProviderEffect{Reference: "mrr_1", IdempotencyKey: k, State: domain.EffectUnknown, Detail: `status "ON_HOLD"`}
		}, []recovery.Verdict{recovery.VerdictInconclusive, recovery.VerdictInconclusive, recovery.VerdictEscalated}, "unknown"},
		{"another amount", func(k domain.IdempotencyKey) domain.ProviderEffect {
			return domain.ProviderEffect{Reference: "mrr_1", IdempotencyKey: k, State: domain.EffectApplied, AmountMinor: 99, Currency: "EUR"}
		}, []recovery.Verdict{recovery.VerdictEscalated}, "99 EUR"},
		{"another operation", func(k domain.IdempotencyKey) domain.ProviderEffect {
			return domain.ProviderEffect{Reference: "mrr_1", OperationID: "OP-9", IdempotencyKey: k, State: domain.EffectApplied}
		}, []recovery.Verdict{recovery.VerdictEscalated}, "OP-9"},
		{"another key", func(domain.IdempotencyKey) domain.ProviderEffect {
			return domain.ProviderEffect{Reference: "mrr_1", IdempotencyKey: "refund-OP-1-a9", State: domain.EffectApplied}
		}, []recovery.Verdict{recovery.VerdictEscalated}, "refund-OP-1-a9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{profile: provider.Meridian})
			claim := f.unknown("OP-1")["OP-1"]
			e := c.effect(claim.IdempotencyKey)
			r := f.reconciler(func(cfg *recovery.ReconcilerConfig) { cfg.Provider = fixedRetrieve{f.client, &e} })
			for i, want := range c.want {
				steps, err := r.ReconcileOnce(f.ctx)
				require.NoError(t, err)
				require.Equal(t, want, steps[0].Verdict, "round %d: %s", i+1, steps[0].Detail)
				require.Contains(t, steps[0].Detail, c.detail)
			}
			require.Equal(t, domain.ExecEscalated, f.execution("OP-1", claim.ExecutionID).State)
			require.Zero(t, f.sim.Ledger().RequestsReceived)
		})
	}
}

// A profile with both reads: a search that finds nothing (it may lag) is
// followed by a retrieve by key before any resend.
func TestReconcilerWithBothReadsRetrievesBeforeResending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	claim := f.unknown("OP-1")["OP-1"]
	both := provider.StripeV1
	both.Name, both.RetrieveByKey = "stripe-and-key", true
	e := domain.ProviderEffect{Reference: "re_found", IdempotencyKey: claim.IdempotencyKey, State: domain.EffectApplied,
		AmountMinor: 12_000, Currency: "eur", CreatedAt: start}
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.Profile = both
		cfg.Provider = fixedRetrieve{laggingLookup{f.client}, &e}
	})
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, recovery.VerdictCompleted, steps[0].Verdict, steps[0].Detail)
	require.Equal(t, "re_found", f.reconciled("OP-1").ProviderReference)
	require.Zero(t, f.sim.Ledger().RequestsReceived, "no resend")
}

func TestReconcilerNeedsAValidProfile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	for name, p := range map[string]domain.ProviderProfile{
		"none":      {},
		"no policy": {Name: "x", API: "stripe", KeyRetention: time.Hour, ReferenceField: "operation_id"},
	} {
		_, err := recovery.NewReconciler(recovery.ReconcilerConfig{Ledger: f.h, Index: f.index, Provider: f.client, Profile: p})
		require.ErrorIs(t, err, domain.ErrInvalidProfile, name)
		require.True(t, strings.Contains(err.Error(), "Profile"), name)
	}
}
