package recovery_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/recovery"
)

// The reconciler's stories are scripts (testdata/*.txt, TestScenarios);
// what stays here asserts on what no script prints: a hostile text's
// escaping and length, the constructor's refusal.

// verdicts maps a round's steps by operation.
func verdicts(steps []recovery.Step) map[domain.OperationID]recovery.Verdict {
	out := map[domain.OperationID]recovery.Verdict{}
	for _, s := range steps {
		out[s.Ref.OperationID] = s.Verdict
	}
	return out
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
