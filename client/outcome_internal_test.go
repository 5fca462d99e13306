package client

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
)

// evidenceText is the ledger's own rule (domain.EvidenceText), written again
// so that the client imports nothing of the domain: the same text out for
// every input, hostile or not.
func TestEvidenceTextIsTheLedgers(t *testing.T) {
	t.Parallel()
	inputs := []string{"", "re_1", "a\x00b", "tab\there", "line\nbreak", "bidi\u202eoverride", "zero\u200bwidth", "c1\u0085",
		"del\x7f", "bad\xffutf8", "é", "ééééé", "emoji 🎉 ok", "\x1b[31mred"}
	for _, s := range inputs {
		for _, max := range []int{0, 1, 3, 5, 8, 64} {
			got, gotAltered := evidenceText(s, max)
			want, wantAltered := domain.EvidenceText(s, max)
			require.Equal(t, want, got, "%q at %d", s, max)
			require.Equal(t, wantAltered, gotAltered, "%q at %d", s, max)
		}
	}
}

// An Execution printed any way shows no secret.
func TestExecutionNeverPrintsItsSecret(t *testing.T) {
	t.Parallel()
	const secret = "the-lease-secret-0123456789-0123456789-abcd"
	x := &Execution{ExecutionID: "EXE-1.1", OperationID: "OP-1", secret: func() string { return secret }}
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		require.NotContains(t, fmt.Sprintf(format, x), secret, format)
		require.NotContains(t, fmt.Sprintf(format, ClaimAnswer{Execution: x}), secret, format)
		require.NotContains(t, fmt.Sprintf(format, Handled{Claim: ClaimAnswer{Execution: x}}), secret, format)
	}
}
