package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// conflictingStore refuses the next appends to one stream with a version
// conflict, as a store does when other writers got there first.
type conflictingStore struct {
	eventstore.Store
	stream    string
	conflicts atomic.Int64 // appends still to refuse
	clock     *clock.Manual
	step      time.Duration // the clock moves this far at each refusal
}

func (s *conflictingStore) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == s.stream && s.conflicts.Load() > 0 { // one caller at a time in this test
		s.conflicts.Add(-1)
		s.clock.Advance(s.step)
		return eventstore.AppendResult{}, &eventstore.WrongExpectedVersionError{Stream: stream}
	}
	return s.Store.Append(ctx, stream, expected, events)
}

// TestHolderRetriesWhileItsLeaseLasts: past MaxConflictRetries, the lease
// holder's renewal and outcome decide again while their lease lasts (by
// the ledger's clock); any other command gives up with ledger.contention;
// and the holder's retries end with its lease.
func TestHolderRetriesWhileItsLeaseLasts(t *testing.T) {
	ctx := context.Background()
	c := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := &conflictingStore{Store: memory.New(nil), stream: "operation-OP-1", clock: c, step: time.Second}
	h, err := ledger.New(ledger.Config{Store: store, Clock: c, MaxConflictRetries: 2, SummaryEvery: time.Millisecond})
	require.NoError(t, err)
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 1000, CorrelationID: "COR-1"}, ledger.Cause{Actor: "agent"})
	require.NoError(t, err)
	_, issued, err := h.DecideAndIssue(ctx, "OP-1", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent"})
	require.NoError(t, err)
	out, err := h.Claim(ctx, "OP-1", domain.Claim{MessageID: "MSG-1", CapabilityID: issued.CapabilityID, WorkerID: "w"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, out.Status)

	// Ten conflicts, ten seconds of a sixty-second lease: the holder's
	// renewal gets through.
	store.conflicts.Store(10)
	_, err = h.RenewLease(ctx, "OP-1", domain.RenewLease{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, WorkerID: "w"}, ledger.Cause{Actor: "w"})
	require.NoError(t, err)
	require.Zero(t, store.conflicts.Load(), "every conflict was met")

	// Another command gives up after MaxConflictRetries.
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-2", OrderID: "ORD-2", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 1000, CorrelationID: "COR-2"}, ledger.Cause{Actor: "agent"})
	require.NoError(t, err)
	store.stream = "operation-OP-2"
	store.conflicts.Store(10)
	_, _, err = h.Decide(ctx, "OP-2", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{Actor: "agent"})
	require.True(t, errors.Is(err, ledger.ErrContention), "got %v", err)

	// Conflicts that outlast the lease: the holder gives up once it ends.
	store.stream = "operation-OP-1"
	store.conflicts.Store(1000)
	err = h.RecordOutcome(ctx, "OP-1", domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret,
		Outcome: domain.Completed, ProviderReference: "re_1"}, ledger.Cause{Actor: "w"})
	require.True(t, errors.Is(err, ledger.ErrContention), "got %v", err)
	left := store.conflicts.Load()
	require.Greater(t, left, int64(1000-200), "it stopped about when its lease ended (60 s at a second a conflict), not after MaxHolderRetries")
}
