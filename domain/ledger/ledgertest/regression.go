package ledgertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// The tests of a log that went back: the store loses the latest events of
// a stream the handler's cache had read or written, as a failover to an
// asynchronous standby does. The cache must notice, drop what it held,
// decide on what the store holds, and say so, once.

// requireShorten skips t when the backend cannot shorten a stream.
func requireShorten(t *testing.T, b Backend) {
	t.Helper()
	if b.Shorten == nil {
		t.Skip("this backend's test server cannot lose events")
	}
}

// lastEvent returns the stream's last event.
func (h *Harness) lastEvent(stream string) eventstore.RecordedEvent {
	h.T.Helper()
	events, err := h.Store.ReadStream(context.Background(), stream, 0, 10_000)
	require.NoError(h.T, err)
	require.NotEmpty(h.T, events)
	return events[len(events)-1]
}

// requireOneRegression checks the one regression the handlers noticed.
func (h *Harness) requireOneRegression(stream string, seen, held int64, seenID string) eventstore.Regression {
	h.T.Helper()
	regs := h.Regressions.Seen()
	require.Len(h.T, regs, 1, "one regression noticed, and told once")
	r := regs[0]
	require.Equal(h.T, domain.CacheState, r.Cache)
	require.Equal(h.T, stream, r.Stream)
	require.Equal(h.T, seen, r.SeenVersion, "the version the cache had")
	require.Equal(h.T, seenID, r.SeenEventID, "the event the cache had there")
	require.Equal(h.T, held, r.HeldVersion, "where the stream ends now")
	require.NotEmpty(h.T, r.Detail)
	return r
}

// shortenedStreamNoticed: the cache holds a claim the store lost. A load
// reads from the cached state's last event, finds the stream shorter, and
// answers what the store holds; the ledger goes on from there, and a new
// claim derives the lost one's key (what the provider deduplicates on).
func shortenedStreamNoticed(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	claimed := h.Claim(h.H, "MSG-1", capID, "worker-a")
	require.Equal(t, domain.StatusClaimed, claimed.Status)
	stream := h.Op.StreamName()
	seen := h.lastEvent(stream)
	require.Equal(t, int64(3), seen.Version)

	b.Shorten(t, h.Store, stream, 1) // the capability and the claim are gone
	s, err := h.H.Load(ctx, h.Op)
	require.NoError(t, err)
	require.Equal(t, int64(1), s.Version, "answered from the store, not from the cache")
	require.Empty(t, s.Executions)
	require.Empty(t, s.Capabilities)
	r := h.requireOneRegression(stream, 3, 1, seen.ID)
	require.Empty(t, r.HeldEventID, "nothing is at version 3 any more")
	execs, ok := r.Context.([]domain.SeenExecution)
	require.True(t, ok, "the regression carries the executions the cache knew")
	require.Equal(t, []domain.SeenExecution{{ExecutionID: claimed.ExecutionID, IdempotencyKey: claimed.Claimed.IdempotencyKey,
		State: domain.ExecExecuting}}, execs)

	again := h.Issue()
	out := h.Claim(h.H, "MSG-2", again, "worker-a")
	require.Equal(t, domain.StatusClaimed, out.Status, "decided on what the store holds")
	require.Equal(t, claimed.Claimed.IdempotencyKey, out.Claimed.IdempotencyKey, "the same attempt, the same provider key")
	require.Len(t, h.Regressions.Seen(), 1, "the reloaded state is trusted again")
}

// shortenedStreamConflict: a command that appends, decided on a cached
// state past the stream's end, conflicts; the catch-up after the conflict
// finds the stream shorter, reloads and decides again — it must not
// conflict for ever (the 503 ledger.contention a rollback used to cause).
// Here the message that made the lost claim is delivered again: on the
// cache it is a duplicate; on the store, whose claim is gone, it claims.
func shortenedStreamConflict(t *testing.T, b Backend) {
	requireShorten(t, b)
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	first := h.Claim(h.H, "MSG-1", capID, "worker-a")
	require.Equal(t, domain.StatusClaimed, first.Status)
	stream := h.Op.StreamName()
	seen := h.lastEvent(stream)

	b.Shorten(t, h.Store, stream, 2) // the claim is gone, the capability not
	again := h.Claim(h.H, "MSG-1", capID, "worker-a")
	require.Equal(t, domain.StatusClaimed, again.Status, "claimed on the store's state, not refused as a duplicate on the cache's")
	require.Equal(t, first.Claimed.IdempotencyKey, again.Claimed.IdempotencyKey)
	require.Equal(t, 1, h.CountEvents(domain.TypeClaimed))
	require.Zero(t, h.CountEvents(domain.TypeDeliveryDuplicated))
	h.requireOneRegression(stream, 3, 2, seen.ID)

	// And a write for the lost execution is refused as unknown, not as
	// contention: the worker that holds its result can tell the two apart.
	b.Shorten(t, h.Store, stream, 2)
	err := h.H.RecordOutcome(context.Background(), h.Op, domain.RecordOutcome{
		ExecutionID: again.ExecutionID, LeaseEpoch: 1, LeaseSecret: again.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_1",
	}, ledger.Cause{Actor: "worker-a"})
	require.NotErrorIs(t, err, ledger.ErrContention)
	requireReason(t, err, domain.ReasonExecutionUnknown)
	require.Len(t, h.Regressions.Seen(), 2)
}

// createAfterRollback: a create re-sent with its request key after the
// store lost the operation is written again, not answered as a replay
// from the cache (Idempotent-Replayed over nothing).
func createAfterRollback(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	req := domain.RequestOperation{
		OperationID: "OP-IDEM-1", OrderID: "ORD-1", AmountMinor: 500, Currency: "EUR", OrderTotalMinor: 1000,
		CorrelationID: "COR-IDEM-1", RequestedBy: "agent-7", RequestKey: "idem-1", RequestHash: "hash-1",
	}
	by := ledger.Cause{Actor: "agent-7"}
	_, err := h.H.RequestOperation(ctx, req, by)
	require.NoError(t, err)
	_, err = h.H.RequestOperation(ctx, req, by)
	requireReason(t, err, domain.ReasonOperationExists) // a replay, while the store holds it
	stream := req.OperationID.StreamName()
	seen := h.lastEvent(stream)

	b.Shorten(t, h.Store, stream, eventstore.NoStreamVersion)
	s, err := h.H.RequestOperation(ctx, req, by)
	require.NoError(t, err, "written again")
	require.True(t, s.Exists())
	require.Equal(t, int64(0), s.Version)
	events, err := h.Store.ReadStream(ctx, stream, 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, domain.TypeOperationRequested, events[0].Type)
	require.NotEqual(t, seen.ID, events[0].ID)
	h.requireOneRegression(stream, 0, eventstore.NoStreamVersion, seen.ID)
}

// rewrittenStreamNoticed: the stream went back and another process wrote
// it up to the cached version again, with other events. The cached
// state's version matches the stream's; its last event does not.
func rewrittenStreamNoticed(t *testing.T, b Backend) {
	requireShorten(t, b)
	ctx := context.Background()
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	require.Equal(t, domain.StatusClaimed, h.Claim(h.H, "MSG-1", capID, "worker-a").Status)
	stream := h.Op.StreamName()
	seen := h.lastEvent(stream)

	b.Shorten(t, h.Store, stream, 1)
	other := h.Handler(h.Another())
	reissued, err := other.IssueCapability(ctx, h.Op, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	require.NoError(t, err)
	theirs := h.Claim(other, "MSG-9", reissued.CapabilityID, "worker-b")
	require.Equal(t, domain.StatusClaimed, theirs.Status)
	now := h.lastEvent(stream)
	require.Equal(t, seen.Version, now.Version, "the stream is as long as the cache remembers")

	s, err := h.H.Load(ctx, h.Op)
	require.NoError(t, err)
	require.Equal(t, domain.MessageID("MSG-9"), s.Executions[0].MessageID, "the store's claim, not the cache's")
	r := h.requireOneRegression(stream, 3, 3, seen.ID)
	require.Equal(t, now.ID, r.HeldEventID, "another event where the cache had its own")
}
