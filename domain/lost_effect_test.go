package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

// TestEscalateLostEffect: an effect the executor holds is escalated only
// when no execution accounts for it, and opens the next execution,
// Escalated, at an attempt no later decision reuses.
func TestEscalateLostEffect(t *testing.T) {
	now := time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)
	op := domain.NewOperation()
	require.NoError(t, op.Evolve(domain.OperationRequested{OperationID: "OP-1", Kind: domain.KindRefund, OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR"}))
	require.NoError(t, op.Evolve(domain.Decided{DecisionID: "DEC-1.1", Kind: domain.KindRefund, Verdict: domain.Allowed, Attempt: 2, Uses: 1, IdempotencyKey: "refund-OP-1-a2"}))
	require.NoError(t, op.Evolve(domain.CapabilityIssued{CapabilityID: "CAP-1.1", DecisionID: "DEC-1.1", Kind: domain.KindRefund, Attempt: 2, Uses: 1, ExpiresAt: now.Add(time.Hour)}))
	require.NoError(t, op.Evolve(domain.Claimed{ExecutionID: "EXE-1.1", CapabilityID: "CAP-1.1", Kind: domain.KindRefund, MessageID: "MSG-1",
		Attempt: 2, Use: 1, LeaseEpoch: 1, IdempotencyKey: "refund-OP-1-a2", LeaseExpiresAt: now.Add(time.Minute)}))
	lost := func(key domain.IdempotencyKey, ref string, o domain.Outcome) domain.EscalateLostEffect {
		return domain.EscalateLostEffect{IdempotencyKey: key, ProviderReference: ref, Outcome: o, Source: domain.LostEffectByLookup}
	}

	events, err := op.EscalateLostEffect(lost("refund-OP-1-a2", "re_2", domain.Completed), now)
	require.NoError(t, err)
	require.Empty(t, events, "an open execution under the key will settle it with this very effect")
	events, err = op.EscalateLostEffect(lost("refund-OP-1-a1", "re_1", domain.NotApplied), now)
	require.NoError(t, err)
	require.Empty(t, events, "nothing was made")
	_, err = op.EscalateLostEffect(lost("refund-OP-1-a1", "re_1", "Maybe"), now)
	require.Error(t, err)

	events, err = op.EscalateLostEffect(lost("refund-OP-1-a1\x00", "re_1", domain.Completed), now)
	require.NoError(t, err)
	require.Len(t, events, 1)
	ev := events[0].(domain.LostEffectEscalated)
	require.Equal(t, domain.ExecutionID("EXE-1.2"), ev.ExecutionID)
	require.Equal(t, 2, ev.Attempt, "at least the latest attempt: the next decision is attempt 3")
	require.Equal(t, domain.IdempotencyKey(`refund-OP-1-a1\x00`), ev.IdempotencyKey, "the executor's text kept escaped")
	require.NoError(t, op.Evolve(ev))
	require.Equal(t, domain.ExecEscalated, op.Execution("EXE-1.2").State)
	require.NotNil(t, op.Blocking())

	events, err = op.EscalateLostEffect(lost("refund-OP-1-a1", "re_1", domain.Completed), now)
	require.NoError(t, err)
	require.Empty(t, events, "escalated once: its reference is recorded")

	gone := domain.NewOperation()
	_, err = gone.EscalateLostEffect(lost("refund-OP-9-a1", "re_9", domain.Completed), now)
	var r *domain.Refusal
	require.ErrorAs(t, err, &r)
	require.Equal(t, domain.ReasonOperationUnknown, r.Reason)
}
