package domain

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireField requires a command.invalid refusal naming field.
func requireField(t *testing.T, err error, field string) {
	t.Helper()
	var r *Refusal
	require.True(t, errors.As(err, &r), "want a refusal naming %s, got %v", field, err)
	require.Equal(t, ReasonCommandInvalid, r.Reason, r.Error())
	require.Equal(t, field, r.Field, r.Error())
	require.NotContains(t, r.Detail, "\x00", "hostile text is quoted escaped")
}

// TestOperationCommandsNameTheFieldAtFault: every text an operation,
// decision or revocation command carries is checked (CheckText or the id
// rule) before anything is decided, and the refusal names the field.
func TestOperationCommandsNameTheFieldAtFault(t *testing.T) {
	good := RequestOperation{
		OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR", CorrelationID: "COR-1",
		RequestedBy: "alice", RequestKey: "key-1", RequestHash: "abc",
	}
	_, err := NewOperation().Request(good, t0)
	require.NoError(t, err)
	for field, change := range map[string]func(*RequestOperation){
		"operation_id":      func(c *RequestOperation) { c.OperationID = "OP-\x00" },
		"correlation_id":    func(c *RequestOperation) { c.CorrelationID = "COR-\x1b[31m" },
		"order_id":          func(c *RequestOperation) { c.OrderID = "ORD-\u202e1" },
		"amount_minor":      func(c *RequestOperation) { c.AmountMinor = -5 },
		"currency":          func(c *RequestOperation) { c.Currency = "eur" },
		"order_total_minor": func(c *RequestOperation) { c.OrderTotalMinor = -1 },
		"request_key":       func(c *RequestOperation) { c.RequestKey = "k\x00" },
		"request_hash":      func(c *RequestOperation) { c.RequestHash = "\xff" },
		"requested_by":      func(c *RequestOperation) { c.RequestedBy = "al\x00ice" },
	} {
		cmd := good
		change(&cmd)
		evs, err := NewOperation().Request(cmd, t0)
		requireField(t, err, field)
		require.Empty(t, evs, field)
	}

	f := newFixture(t)
	okDecide := Decide{DecisionID: "DEC-1", Approver: "ops", ApprovalLimitMinor: 50000, Facts: okFacts}
	for field, change := range map[string]func(*Decide){
		"decision_id":             func(c *Decide) { c.DecisionID = "DEC-\x00" },
		"approver":                func(c *Decide) { c.Approver = "ops\x00" },
		"approval_limit_minor":    func(c *Decide) { c.ApprovalLimitMinor = -1 },
		"facts.refunded_minor":    func(c *Decide) { c.Facts.RefundedMinor = -1 },
		"facts.order_total_minor": func(c *Decide) { c.Facts.OrderTotalMinor = -1 },
		"key_policy":              func(c *Decide) { c.KeyPolicy = "whatever" },
	} {
		cmd := okDecide
		change(&cmd)
		_, err := f.op.Decide(cmd, t0)
		requireField(t, err, field)
		_, err = f.op.DecideAndIssue(cmd, IssueCapability{CapabilityID: "CAP-1"}, t0)
		requireField(t, err, field)
	}
	_, err = f.op.DecideAndIssue(okDecide, IssueCapability{CapabilityID: "CAP \x00"}, t0)
	requireField(t, err, "capability_id")

	f.allow("DEC-2", "")
	f.issue("CAP-2", t0)
	for field, cmd := range map[string]RevokeCapability{
		"reason":     {CapabilityID: "CAP-2", Reason: "oops\x00", Actor: "olga"},
		"revoked_by": {CapabilityID: "CAP-2", Reason: "oops", Actor: "olga\u202e"},
	} {
		_, err := f.op.RevokeCapability(cmd, t0)
		requireField(t, err, field)
	}
	require.Equal(t, CapIssued, f.op.Capabilities["CAP-2"].State)
}
