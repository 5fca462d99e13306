package harness_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore/memory"
)

// The story on each provider, then `audit provider-diff` on that provider's
// own export format (JSON lines for Stripe, a CSV report for Meridian), read
// through its adapter: the ledger and the provider agree on one refund.
func TestStoryAndProviderDiffOnEachProvider(t *testing.T) {
	for _, name := range provider.BuiltinProfileNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			profile, err := provider.ProfileNamed(name)
			require.NoError(t, err)
			store := memory.New(nil)
			w, err := harness.New(harness.Options{Store: store, Profile: profile, ClientAttempts: 1})
			require.NoError(t, err)
			t.Cleanup(w.Close)
			var out bytes.Buffer
			sum, err := harness.RunStory(t.Context(), w, &out, harness.DirectCourier{})
			require.NoError(t, err, out.String())
			require.Equal(t, harness.Summary{
				RefundsCreated: 1, ProviderRequests: 1, ReplaysRejected: 1, DuplicatesRecorded: 1,
				UnknownReconciled: 1, FinalState: string(domain.OpCompleted),
			}, sum, out.String())

			var export bytes.Buffer
			require.NoError(t, w.Sim.WriteLedgerExport(&export))
			x, err := provider.ExportReader(name, &export)
			require.NoError(t, err)
			d, err := audit.ProviderDiff(t.Context(), store, x)
			require.NoError(t, err)
			require.True(t, d.OK(), "%+v", d)
			require.Equal(t, int64(1), d.ProviderRefunds)
			require.Equal(t, int64(1), d.Matched)
		})
	}
}
