package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore/postgres/pgtest"
)

// The demo is the README's main command: it must end with one refund, every
// invariant holding, on PostgreSQL (with serve's roles) and in memory.
func TestDemo(t *testing.T) {
	for _, args := range [][]string{{"demo", "--database-url", pgtest.URL()}, {"demo", "--memory"}} {
		t.Run(args[len(args)-1], func(t *testing.T) {
			t.Parallel()
			var out, errs bytes.Buffer
			code := run(t.Context(), args, &out, &errs)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out.String(), errs.String())
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var result struct {
				RefundsCreated     int    `json:"refunds_created"`
				ProviderRequests   int    `json:"provider_requests"`
				ReplaysRejected    int    `json:"replays_rejected"`
				DuplicatesRecorded int    `json:"duplicates_recorded"`
				UnknownReconciled  int    `json:"unknown_reconciled"`
				Invariants         string `json:"invariants"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &result))
			require.Equal(t, 1, result.RefundsCreated)
			require.Equal(t, 1, result.ProviderRequests)
			require.Equal(t, 1, result.ReplaysRejected)
			require.Equal(t, 1, result.DuplicatesRecorded)
			require.Equal(t, 1, result.UnknownReconciled)
			require.Equal(t, "ok", result.Invariants)
		})
	}
}
