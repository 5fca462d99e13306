package harness_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/harness"
	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

func TestStoryEndsWithOneRefund(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) eventstore.Store{
		"memory":   func(*testing.T) eventstore.Store { return memory.New(nil) },
		"postgres": func(t *testing.T) eventstore.Store { return pgtest.OpenStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, err := harness.New(harness.Options{Store: open(t), ClientAttempts: 1})
			require.NoError(t, err)
			t.Cleanup(w.Close)
			var out bytes.Buffer
			sum, err := harness.RunStory(t.Context(), w, &out, nil)
			require.NoError(t, err, out.String())
			require.Equal(t, harness.Summary{
				RefundsCreated: 1, ProviderRequests: 1, ReplaysRejected: 1, DuplicatesRecorded: 1,
				UnknownReconciled: 1, FinalState: string(domain.OpCompleted),
			}, sum, out.String())
			require.Contains(t, out.String(), "Fri 15:30:00")
		})
	}
}
