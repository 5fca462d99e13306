package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore/postgres/pgtest"
)

// BenchmarkClaim measures one full Claim on Postgres: load the operation's
// stream (request, decision, capability), decide, append the Claimed event
// under the expected version. Setting up each operation is not timed.
func BenchmarkClaim(b *testing.B) {
	store := pgtest.OpenStore(b)
	h, err := ledger.New(ledger.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	setup := func(i int) (domain.OperationID, domain.CapabilityID) {
		op := domain.OperationID(fmt.Sprintf("OP-B%d", i))
		if _, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-1", AmountMinor: 100,
			Currency: "EUR", OrderTotalMinor: 1000, CorrelationID: "COR-1"}, ledger.Cause{}); err != nil {
			b.Fatal(err)
		}
		if _, _, err := h.Decide(ctx, op, domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{}); err != nil {
			b.Fatal(err)
		}
		c, err := h.IssueCapability(ctx, op, domain.IssueCapability{}, ledger.Cause{})
		if err != nil {
			b.Fatal(err)
		}
		return op, c.CapabilityID
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		op, capID := setup(i)
		b.StartTimer()
		out, err := h.Claim(ctx, op, domain.Claim{MessageID: domain.MessageID(fmt.Sprintf("MSG-%d", i)), CapabilityID: capID, WorkerID: "bench"})
		if err != nil || out.Status != domain.StatusClaimed {
			b.Fatalf("claim: %v %s", err, out.Status)
		}
	}
}

// BenchmarkCatchUpCached measures the catch-up of a cached state with
// nothing new on Postgres: Load of an operation the handler's cache holds
// (request, decision, capability, claim), which is the read a decision
// that appends nothing makes before it returns. The read starts at the
// cached state's last event, to tell a stream that went back: one row
// more than nothing, in the same single round trip.
func BenchmarkCatchUpCached(b *testing.B) {
	store := pgtest.OpenStore(b)
	h, err := ledger.New(ledger.Config{Store: store})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	op := domain.OperationID("OP-CATCHUP")
	if _, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-1", AmountMinor: 100,
		Currency: "EUR", OrderTotalMinor: 1000, CorrelationID: "COR-1"}, ledger.Cause{}); err != nil {
		b.Fatal(err)
	}
	if _, _, err := h.Decide(ctx, op, domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}}, ledger.Cause{}); err != nil {
		b.Fatal(err)
	}
	c, err := h.IssueCapability(ctx, op, domain.IssueCapability{}, ledger.Cause{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := h.Claim(ctx, op, domain.Claim{MessageID: "MSG-1", CapabilityID: c.CapabilityID, WorkerID: "bench"}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := h.Load(ctx, op)
		if err != nil || s.Version != 3 {
			b.Fatalf("load: %v", err)
		}
	}
}
