package httpapi

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
)

// A read the provider answered is counted found or not_found, never as the
// creation outcome Completed; one it did not answer keeps its outcome.
func TestProviderReadOutcomes(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	for _, s := range []provider.Send{
		{Kind: provider.SendLookup, Outcome: domain.Completed, NotFound: true},
		{Kind: provider.SendLookup, Outcome: domain.Completed},
		{Kind: provider.SendRetrieve, Outcome: domain.Completed, NotFound: true},
		{Kind: provider.SendLookup, Outcome: domain.Unknown},
		{Kind: provider.SendCreate, Outcome: domain.Completed},
	} {
		m.ObserveSend(t.Context(), s)
	}
	count := func(kind, outcome string) float64 {
		var pb dto.Metric
		require.NoError(t, m.providerSends.WithLabelValues(kind, outcome).Write(&pb))
		return pb.GetCounter().GetValue()
	}
	require.Equal(t, 1.0, count("lookup", "not_found"))
	require.Equal(t, 1.0, count("lookup", "found"))
	require.Equal(t, 1.0, count("retrieve", "not_found"))
	require.Equal(t, 1.0, count("lookup", "Unknown"))
	require.Equal(t, 1.0, count("create", "Completed"))
	require.Zero(t, count("lookup", "Completed"), "a lookup that found nothing is not Completed")
}
