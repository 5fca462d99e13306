package ledger_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// countingStore counts the stream reads made through it and the events
// they returned.
type countingStore struct {
	eventstore.Store
	reads, rows atomic.Int64
}

func (s *countingStore) ReadStream(ctx context.Context, stream string, from int64, limit int) ([]eventstore.RecordedEvent, error) {
	events, err := s.Store.ReadStream(ctx, stream, from, limit)
	s.reads.Add(1)
	s.rows.Add(int64(len(events)))
	return events, err
}

// TestCatchUpGainsNoRead: telling a stream that went back costs the
// command handler no read of its own. A command on a cached state that
// appends reads nothing; one that appends nothing (a duplicate delivery's
// answer is recorded, so here a replayed create) and a load each make the
// one catch-up read they made before, which now returns the cached
// state's last event too: one row more, no round trip more.
func TestCatchUpGainsNoRead(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: memory.New(nil)}
	h, err := ledger.New(ledger.Config{Store: store})
	require.NoError(t, err)
	req := domain.RequestOperation{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 1000, CorrelationID: "COR-1", RequestKey: "k", RequestHash: "h"}
	_, err = h.RequestOperation(ctx, req, ledger.Cause{})
	require.NoError(t, err)
	require.Equal(t, int64(1), store.reads.Load(), "the first command loads the stream (it does not exist)")

	reads := func(f func()) (int64, int64) {
		r0, n0 := store.reads.Load(), store.rows.Load()
		f()
		return store.reads.Load() - r0, store.rows.Load() - n0
	}
	r, _ := reads(func() {
		_, _, err := h.Decide(ctx, "OP-1", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{})
		require.NoError(t, err)
	})
	require.Zero(t, r, "a command that appends on a cached state reads nothing: the append is fenced by its expected version")
	r, n := reads(func() {
		_, err := h.RequestOperation(ctx, req, ledger.Cause{})
		require.Error(t, err)
	})
	require.Equal(t, int64(1), r, "a decision that appends nothing makes one catch-up read")
	require.Equal(t, int64(1), n, "which returns the cached state's last event, and nothing new")
	r, n = reads(func() {
		_, err := h.Load(ctx, "OP-1")
		require.NoError(t, err)
	})
	require.Equal(t, [2]int64{1, 1}, [2]int64{r, n}, "a load of a cached operation: one read, one row")
}
