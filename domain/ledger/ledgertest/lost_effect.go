package ledgertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/worker"
	"opledger/eventstore"
)

// losingProvider makes the refund, and meanwhile the store loses the
// claim it was made for: lose runs before the answer (a failover to an
// asynchronous standby while the request was in flight).
type losingProvider struct {
	lose  func()
	calls atomic.Int32
}

func (p *losingProvider) CreateRefund(_ context.Context, req domain.RefundRequest) domain.RefundResult {
	p.calls.Add(1)
	p.lose()
	return domain.RefundResult{Outcome: domain.Completed, ProviderReference: "re_lost_" + string(req.IdempotencyKey), Detail: "201"}
}

func (p *losingProvider) LookupByReference(context.Context, domain.OperationID) ([]domain.ProviderEffect, error) {
	return nil, domain.ErrReadUnsupported
}

func (p *losingProvider) RetrieveByKey(context.Context, domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	return domain.ProviderEffect{}, false, domain.ErrReadUnsupported
}

// never is a timer that never fires: the worker renews no lease here.
func never(time.Duration) <-chan time.Time { return nil }

// workerKeepsTheLostEffect: a worker's handler (its cache named
// worker_cache) claims; while the refund is made, the store loses the
// claim. Recording the outcome finds the stream shorter than the worker's
// cache (noticed, read again), the execution unknown — and the worker
// records what the provider did as a lost effect, escalated to a person,
// instead of waiting for a lease that will never lapse. The operation is
// blocked: the message delivered again makes no second request.
func workerKeepsTheLostEffect(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	stream := h.Op.StreamName()
	wl, err := ledger.New(ledger.Config{Store: h.Another(), Clock: h.Clock, AppendRetryBackoff: time.Millisecond,
		Regressions: h.Regressions, CacheName: domain.CacheWorker})
	require.NoError(t, err)
	prov := &losingProvider{lose: func() { b.Shorten(t, h.Store, stream, 2) }}
	w, err := worker.New(worker.Config{ID: "worker-a", Ledger: wl, Provider: prov, Clock: h.Clock, After: never,
		RecordBackoff: time.Millisecond, RecordBackoffMax: time.Millisecond})
	require.NoError(t, err)

	res, err := w.Handle(ctx, worker.Delivery{MessageID: "MSG-1", OperationID: h.Op, CapabilityID: capID})
	require.NoError(t, err)
	require.True(t, res.Executed)
	require.Equal(t, "lost-effect", res.Recorded, "recorded as a lost effect, not left to a lapse that cannot come")
	regs := h.Regressions.Seen()
	require.Len(t, regs, 1)
	require.Equal(t, domain.CacheWorker, regs[0].Cache)
	require.Equal(t, int64(3), regs[0].SeenVersion, "the worker's cache had its claim")
	require.Equal(t, int64(2), regs[0].HeldVersion)

	s := h.State()
	require.Len(t, s.Executions, 1)
	x := s.Executions[0]
	require.Equal(t, domain.ExecEscalated, x.State)
	require.Equal(t, domain.IdempotencyKey("refund-OP-4471-a1"), x.IdempotencyKey)
	require.Equal(t, "re_lost_refund-OP-4471-a1", x.ProviderReference)
	require.Equal(t, domain.OpEscalated, s.Status())
	events, err := h.Store.ReadStream(ctx, stream, 3, 1)
	require.NoError(t, err)
	d, err := codec.DecodeRecorded(events[0])
	require.NoError(t, err)
	lost := d.Event.(domain.LostEffectEscalated)
	require.Equal(t, domain.LostEffectByWorker, lost.Source)
	require.Equal(t, res.Claim.Claimed.ExecutionID, lost.LostExecutionID)

	again, err := w.Handle(ctx, worker.Delivery{MessageID: "MSG-1", OperationID: h.Op, CapabilityID: capID})
	require.NoError(t, err)
	require.NotEqual(t, domain.StatusClaimed, again.Claim.Status, "the escalated effect blocks a new execution")
	require.Equal(t, int32(1), prov.calls.Load(), "one request to the provider")

	// A person settles it.
	require.NoError(t, h.H.Reconcile(ctx, h.Op, domain.Reconcile{ExecutionID: x.ID, Outcome: domain.Completed, Method: domain.MethodOperator,
		ProviderReference: x.ProviderReference, Actor: "olga", Evidence: "provider dashboard: re_lost_… succeeded"}, ledger.Cause{Actor: "olga"}))
	require.Equal(t, domain.OpCompleted, h.State().Status())

	// The log is a valid history: audit verify accepts the escalated lost
	// effect and its resolution.
	rep, err := audit.Verify(ctx, h.Store, audit.VerifyOptions{})
	require.NoError(t, err)
	require.Zero(t, rep.ViolationCount, "%v", rep.Violations)
}

// lostOperationIsEvidence: the store lost the whole operation while its
// refund was made; the effect is recorded in the unattributed evidence
// stream, never dropped.
func lostOperationIsEvidence(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	cmd := domain.EscalateLostEffect{LostExecutionID: "EXE-4471.1", IdempotencyKey: "refund-OP-4471-a1", ProviderReference: "re_9",
		Outcome: domain.Completed, AmountMinor: 12000, Currency: "EUR", Source: domain.LostEffectByWorker, Detail: "201"}
	b.Shorten(t, h.Store, h.Op.StreamName(), eventstore.NoStreamVersion)
	escalated, err := h.H.EscalateLostEffect(ctx, h.Op, cmd, ledger.Cause{Actor: "worker-a"})
	require.NoError(t, err)
	require.True(t, escalated)
	events, err := h.Store.ReadStream(ctx, domain.UnattributedStreamFor(h.Clock.Now()), 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	d, err := codec.DecodeRecorded(events[0])
	require.NoError(t, err)
	ev := d.Event.(domain.LostEffectEscalated)
	require.Equal(t, h.Op, ev.OperationID)
	require.Empty(t, ev.ExecutionID, "no operation to open an execution in")
	require.Equal(t, "re_9", ev.ProviderReference)
	rep, err := audit.Verify(ctx, h.Store, audit.VerifyOptions{})
	require.NoError(t, err)
	require.Zero(t, rep.ViolationCount, "%v", rep.Violations)

	// Nothing was made: nothing to escalate.
	cmd.Outcome = domain.NotApplied
	escalated, err = h.H.EscalateLostEffect(ctx, h.Op, cmd, ledger.Cause{Actor: "worker-a"})
	require.NoError(t, err)
	require.False(t, escalated)
}
