package domain

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// fixture is an operation folded from the events its test decided.
type fixture struct {
	t  *testing.T
	op *Operation
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, op: NewOperation()}
	f.apply(f.op.Request(RequestOperation{
		OperationID: "OP-4471", OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: "COR-2210",
	}, t0))
	return f
}

func (f *fixture) apply(events []Event, err error) []Event {
	f.t.Helper()
	require.NoError(f.t, err)
	for _, e := range events {
		require.NoError(f.t, f.op.Evolve(e))
		f.op.Version++
	}
	return events
}

func (f *fixture) record(events []Event) {
	f.t.Helper()
	for _, e := range events {
		require.NoError(f.t, f.op.Evolve(e))
		f.op.Version++
	}
}

var okFacts = Facts{OrderRefundable: true, RefundedMinor: 0}

func (f *fixture) allow(id DecisionID, policy KeyPolicy) Decided {
	f.t.Helper()
	ev := f.apply(f.op.Decide(Decide{DecisionID: id, Approver: "agent-7", ApprovalLimitMinor: 50000, Facts: okFacts, KeyPolicy: policy}, t0))
	d := ev[0].(Decided)
	require.Equal(f.t, Allowed, d.Verdict, d.Reasons)
	return d
}

func (f *fixture) issue(id CapabilityID, at time.Time) CapabilityIssued {
	f.t.Helper()
	return f.apply(f.op.IssueCapability(IssueCapability{CapabilityID: id}, at))[0].(CapabilityIssued)
}

func (f *fixture) claim(msg MessageID, capID CapabilityID, exe ExecutionID, at time.Time) ClaimResult {
	f.t.Helper()
	r, err := f.op.Claim(Claim{MessageID: msg, CapabilityID: capID, WorkerID: "worker-a", ExecutionID: exe, LeaseSecretDigest: LeaseSecretDigest(secretOf(exe))}, at)
	require.NoError(f.t, err)
	f.record(r.Events)
	return r
}

// secretOf is the lease secret the fixture's claims hand to execution exe
// (the command handler mints random ones; the model only sees digests).
func secretOf(exe ExecutionID) string { return "secret-of-" + string(exe) }

func TestIdentifiersAreValidated(t *testing.T) {
	_, err := ParseOperationID("CAP-1")
	require.ErrorIs(t, err, ErrInvalidID)
	_, err = ParseOperationID("OP-")
	require.ErrorIs(t, err, ErrInvalidID)
	_, err = ParseMessageID("has space")
	require.ErrorIs(t, err, ErrInvalidID)
	id, err := ParseCapabilityID("CAP-91F")
	require.NoError(t, err)
	require.Equal(t, CapabilityID("CAP-91F"), id)
	require.Equal(t, "operation-OP-4471", OperationID("OP-4471").StreamName())
}

func TestEvolveRefusesImpossibleHistory(t *testing.T) {
	op := NewOperation()
	require.Error(t, op.Evolve(Claimed{ExecutionID: "EXE-1"}), "an event before OperationRequested")
	f := newFixture(t)
	require.Error(t, f.op.Evolve(Claimed{ExecutionID: "EXE-1", CapabilityID: "CAP-NONE"}))
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	require.Error(t, f.op.Evolve(Claimed{ExecutionID: "EXE-2", CapabilityID: "CAP-1"}), "a capability consumed twice")
}

func requireReason(t *testing.T, err error, reason Reason) {
	t.Helper()
	var r *Refusal
	require.True(t, errors.As(err, &r), "want refusal %s, got %v", reason, err)
	require.Equal(t, reason, r.Reason, r.Detail)
}

func TestChildIDsNameTheirOperation(t *testing.T) {
	id := ChildID(PrefixExecution, "OP-4471", 2)
	require.Equal(t, "EXE-4471.2", id)
	op, ok := OperationOf(id)
	require.True(t, ok)
	require.Equal(t, OperationID("OP-4471"), op)
	op, ok = OperationOf(ChildID(PrefixCapability, "OP-a.b.c", 11))
	require.True(t, ok)
	require.Equal(t, OperationID("OP-a.b.c"), op)
	for _, bad := range []string{"EXE-4471", "EXE-.1", "EXE-4471.", "EXE-4471.x", "MSG-1.1"} {
		_, ok := OperationOf(bad)
		require.False(t, ok, bad)
	}
}
