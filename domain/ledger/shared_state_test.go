package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
)

// TestSharedStateStaysAsHandedOut: the handler hands out the state its
// cache holds, with no copy, so nothing may change a state once handed
// out: a command that appends folds its events into a clone, and a
// catch-up that finds newer events clones before folding them.
func TestSharedStateStaysAsHandedOut(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil)
	h, err := ledger.New(ledger.Config{Store: store})
	require.NoError(t, err)
	other, err := ledger.New(ledger.Config{Store: store})
	require.NoError(t, err)
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100,
		Currency: "EUR", OrderTotalMinor: 1000, CorrelationID: "COR-1"}, ledger.Cause{})
	require.NoError(t, err)

	before, err := h.Load(ctx, "OP-1")
	require.NoError(t, err)
	want := before.Clone()
	_, after, err := h.Decide(ctx, "OP-1", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{})
	require.NoError(t, err)
	require.Equal(t, want, before, "the command folded its event into a state handed out before")
	require.Len(t, after.Decisions, 1)

	want = after.Clone()
	_, err = other.IssueCapability(ctx, "OP-1", domain.IssueCapability{}, ledger.Cause{})
	require.NoError(t, err)
	caught, err := h.Load(ctx, "OP-1") // catches up with the other handler's event
	require.NoError(t, err)
	require.Len(t, caught.Capabilities, 1)
	require.Equal(t, want, after, "the catch-up folded into a state handed out before")
}

// TestConcurrentCommandsShareNoPartialState: readers walk the state the
// handler hands out while commands on the same operation append, conflict
// and catch up. Under -race, any write to a state handed out (a partial
// state another command could see) is reported.
func TestConcurrentCommandsShareNoPartialState(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil)
	h, err := ledger.New(ledger.Config{Store: store, MaxConflictRetries: 64, SummaryEvery: time.Millisecond})
	require.NoError(t, err)
	other, err := ledger.New(ledger.Config{Store: store, MaxConflictRetries: 64, SummaryEvery: time.Millisecond})
	require.NoError(t, err)
	_, err = h.RequestOperation(ctx, domain.RequestOperation{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100,
		Currency: "EUR", OrderTotalMinor: 1000, CorrelationID: "COR-1"}, ledger.Cause{})
	require.NoError(t, err)
	_, issued, err := h.DecideAndIssue(ctx, "OP-1", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}},
		domain.IssueCapability{}, ledger.Cause{})
	require.NoError(t, err)

	const presenters, presentations = 4, 8
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan int)
	go func() { // reads every state handed out, to the last field
		n := 0
		defer func() { readerDone <- n }()
		for {
			s, err := h.Load(ctx, "OP-1")
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Clone()
			n++
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	claimed := make(chan int, presenters)
	for p := range presenters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hd := h
			if p%2 == 1 {
				hd = other
			}
			n := 0
			for i := range presentations {
				out, err := hd.Claim(ctx, "OP-1", domain.Claim{MessageID: domain.MessageID(fmt.Sprintf("MSG-%d-%d", p, i)),
					CapabilityID: issued.CapabilityID, WorkerID: "w"})
				if err != nil {
					t.Error(err)
					return
				}
				_ = out.Operation.Clone()
				if out.Status == domain.StatusClaimed {
					n++
				}
			}
			claimed <- n
		}()
	}
	wg.Wait()
	close(stop)
	require.Positive(t, <-readerDone, "the reader read")
	total := 0
	for range presenters {
		total += <-claimed
	}
	require.Equal(t, 1, total, "one presentation claims; the others are refused")
	s, err := h.Load(ctx, "OP-1")
	require.NoError(t, err)
	require.Len(t, s.Messages, 1, "the claim's message is on the state")
	evidence, err := store.ReadStream(ctx, domain.EvidenceStreamOf("OP-1"), 0, 1000)
	require.NoError(t, err)
	require.NotEmpty(t, evidence, "the refused presentations are beside it, in its evidence stream")
}
