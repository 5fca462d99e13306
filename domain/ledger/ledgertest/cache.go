package ledgertest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// staleCacheFenced: a handler whose cached state is behind the stream
// (another handler, over another store instance, claimed the capability
// since) decides on it and appends at its version; the store refuses the
// append, the handler catches up and decides again, and the presentation
// is refused as a replay: one Claimed, whatever the cache said.
func staleCacheFenced(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue() // h.H now caches the operation with the capability Issued
	other := h.Handler(h.Another())
	first := h.Claim(other, "MSG-1", capID, "worker-b")
	require.Equal(t, domain.StatusClaimed, first.Status)

	second := h.Claim(h.H, "MSG-2", capID, "worker-a")
	require.NotEqual(t, domain.StatusClaimed, second.Status, "the stale cache let a second claim through")
	require.Equal(t, domain.StatusAlreadyConsumed, second.Status)
	require.Equal(t, 1, h.CountEvents(domain.TypeClaimed), "the stream holds one Claimed")
	require.Equal(t, 1, h.CountEvents(domain.TypePresentationRejected), "the replay is recorded")
	require.Len(t, second.Operation.Executions, 1, "the answer is given on the caught-up state")
}

// staleCacheRefusalRechecked: a decision that appends nothing is not
// fenced by the store, so one taken on a cached state is checked against
// the stream first. Here the cached state predates the execution another
// handler opened: on it, an outcome for that execution would be refused
// as unknown; the handler finds the newer events and records the outcome.
// The same holds for a worker recording at the version it holds while its
// lease was renewed elsewhere.
func staleCacheRefusalRechecked(t *testing.T, b Backend) {
	ctx := context.Background()
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	other := h.Handler(h.Another())
	claimed := h.Claim(other, "MSG-1", capID, "worker-b")
	require.Equal(t, domain.StatusClaimed, claimed.Status)

	err := h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{
		ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret,
		Outcome: domain.Completed, ProviderReference: "re_1",
	}, ledger.Cause{Actor: "worker-b"})
	require.NoError(t, err, "the outcome is recorded on the stream's state, not refused on the cache's")
	require.Equal(t, 1, h.CountEvents(domain.TypeOutcomeRecorded))
	require.Equal(t, domain.OpCompleted, h.State().Status())

	// And the other way round: the handler that claimed renews, then the
	// first records again — refused on the state that holds the outcome.
	err = other.RecordOutcome(ctx, h.Op, domain.RecordOutcome{
		ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret, Outcome: domain.NotApplied,
	}, ledger.Cause{Actor: "worker-b"})
	requireReason(t, err, domain.ReasonLeaseLost)
	require.Equal(t, 1, h.CountEvents(domain.TypeOutcomeRecorded), "the second outcome is refused")
}

// readCounter counts the stream reads sent to a store.
type readCounter struct {
	eventstore.Store
	reads atomic.Int64
}

func (r *readCounter) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	r.reads.Add(1)
	return r.Store.ReadStream(ctx, stream, from, limit)
}

// kindFromCache: an operation's kind never changes, so a handler that
// holds the operation answers Kind with no read, however far behind the
// stream its cached state is; a handler that does not reads it once.
func kindFromCache(t *testing.T, b Backend) {
	ctx := context.Background()
	h := NewHarness(t, b)
	store := &readCounter{Store: h.Another()}
	cold := h.Handler(store)
	kind, err := cold.Kind(ctx, h.Op)
	require.NoError(t, err)
	require.Equal(t, domain.KindRefund, kind)
	first := store.reads.Load()
	require.Positive(t, first, "a handler that never saw the operation reads it")

	h.Allow(OKFacts) // the stream moves on behind cold's cached state
	kind, err = cold.Kind(ctx, h.Op)
	require.NoError(t, err)
	require.Equal(t, domain.KindRefund, kind)
	require.Equal(t, first, store.reads.Load(), "the cached operation's kind needs no read")

	kind, err = cold.Kind(ctx, "OP-NONE")
	require.NoError(t, err, "an operation that does not exist is not an error here")
	require.Equal(t, domain.NewOperation().Kind, kind)
}
