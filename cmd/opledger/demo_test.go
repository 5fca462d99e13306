package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"opledger/adapters/transport"

	"opledger/eventstore/postgres/pgtest"
)

// The demo is the README's main command: it must end with one refund, every
// invariant holding, on PostgreSQL (with serve's roles) and in memory.
func TestDemo(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, transport.TopicRefundRequests),
		kfake.SeedTopics(1, transport.TopicDeadLetters, transport.TopicSecuritySignals))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	brokers := strings.Join(kc.ListenAddrs(), ",")
	for name, args := range map[string][]string{
		"postgres": {"demo", "--database-url", pgtest.URL()},
		"memory":   {"demo", "--memory"},
		"kafka":    {"demo", "--database-url", pgtest.URL(), "--kafka", "--kafka-brokers", brokers},
	} {
		t.Run(name, func(t *testing.T) {
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
				ForgeryCaught      bool   `json:"forgery_caught"`
				ExportUses         int    `json:"export_uses"`
				ExportsDelivered   int    `json:"exports_delivered"`
				ExportKeys         int    `json:"export_keys"`
				ExportReplays      int    `json:"export_replays_rejected"`
				ExportReconciled   int    `json:"export_unknown_reconciled"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &result))
			require.Equal(t, 1, result.RefundsCreated)
			require.Equal(t, 1, result.ProviderRequests)
			require.Equal(t, 1, result.ReplaysRejected)
			require.Equal(t, 1, result.DuplicatesRecorded)
			require.Equal(t, 1, result.UnknownReconciled)
			require.Equal(t, "ok", result.Invariants)
			require.True(t, result.ForgeryCaught, "the closing demonstration's forgery is caught")
			require.Equal(t, []int{3, 3, 3, 1, 1}, []int{result.ExportUses, result.ExportsDelivered, result.ExportKeys, result.ExportReplays, result.ExportReconciled},
				"three downloads, each under its own key, the fourth refused as a replay")
			require.True(t, strings.HasPrefix(lines[len(lines)-1], `{"refunds_created":1,`), "the line's existing fields come first, as before")
			require.Contains(t, out.String(), "== the second kind: three downloads of a generated export")
			require.Contains(t, out.String(), "DEMONSTRATION: an insider forges history")
			if name == "kafka" {
				require.Contains(t, out.String(), "the relay into Kafka at "+brokers)
				require.Contains(t, out.String(), "the queue redelivers MSG-")
			}
		})
	}
}
