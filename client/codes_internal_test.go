package client

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

// documentedCodes are the codes of docs/api.md's "Errors" table: the second
// column, and for the 409 row the ledger's reasons it lists.
func documentedCodes(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(raw), "\n## Errors\n")
	require.True(t, ok)
	start := strings.Index(table, "\n| status | code |")
	require.GreaterOrEqual(t, start, 0, "the table's header")
	table, _, _ = strings.Cut(table[start+1:], "\n\n")
	code := regexp.MustCompile("`([a-z][a-z.-]*)`")
	var codes []string
	for _, row := range strings.Split(table, "\n") {
		cols := strings.Split(row, "|")
		if len(cols) < 4 || strings.TrimSpace(cols[1]) == "status" || strings.HasPrefix(strings.TrimSpace(cols[1]), "---") {
			continue
		}
		col := cols[2]
		if strings.TrimSpace(cols[1]) == "409" {
			col = cols[3]
		}
		for _, m := range code.FindAllStringSubmatch(col, -1) {
			codes = append(codes, m[1])
		}
	}
	require.Greater(t, len(codes), 20, "the table was read")
	return codes
}

// Every code docs/api.md documents has its sentinel here, and every claim
// status and reason the ledger answers a claim with has its constant: a
// code added to the table without one fails this test (add it to
// errors.go, and to clients/python's errors.py, whose test does the same).
func TestEveryDocumentedCodeIsTyped(t *testing.T) {
	t.Parallel()
	for _, c := range documentedCodes(t) {
		require.Contains(t, documented, c, "docs/api.md documents %s: add a sentinel to client/errors.go", c)
	}
	statuses := []ClaimStatus{Claimed, DuplicateDelivery, AlreadyConsumed, Expired, Revoked, Invalid, OperationNotExecutable}
	for _, s := range []domain.ClaimStatus{domain.StatusClaimed, domain.StatusDuplicateDelivery, domain.StatusAlreadyConsumed,
		domain.StatusExpired, domain.StatusRevoked, domain.StatusInvalid, domain.StatusOperationNotExecutable} {
		require.Contains(t, statuses, ClaimStatus(s))
	}
	reasons := []string{ReasonDeliveryDuplicate, ReasonCapabilityAlreadyConsumed, ReasonCapabilityExpired, ReasonCapabilityRevoked,
		ReasonCapabilityInvalid, ReasonCapabilityWrongOperation, ReasonCapabilityWrongAttempt, ReasonCapabilitySuperseded,
		ReasonOperationUnknown, ReasonOperationExecuting, ReasonOperationOutcomeUnknown, ReasonOperationCompleted}
	for _, r := range []domain.Reason{domain.ReasonDeliveryDuplicate, domain.ReasonCapabilityAlreadyConsumed, domain.ReasonCapabilityExpired,
		domain.ReasonCapabilityRevoked, domain.ReasonCapabilityInvalid, domain.ReasonCapabilityWrongOperation,
		domain.ReasonCapabilityWrongAttempt, domain.ReasonCapabilitySuperseded, domain.ReasonOperationUnknown,
		domain.ReasonOperationExecuting, domain.ReasonOperationOutcomeUnknown, domain.ReasonOperationCompleted,
		domain.ReasonLeaseLost, domain.ReasonLeaseNotHeld, domain.ReasonExecutionNotUnknown, domain.ReasonLateNotApplied} {
		if strings.HasPrefix(string(r), "lease.") || strings.HasPrefix(string(r), "execution.") || strings.HasPrefix(string(r), "late-") {
			require.Contains(t, documented, string(r), "an executor's refusal has its sentinel")
			continue
		}
		require.Contains(t, reasons, string(r))
	}
}
