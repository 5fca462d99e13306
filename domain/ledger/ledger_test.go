package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain/ledger/ledgertest"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

func TestLedgerOnMemoryStore(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		New: func(t *testing.T) (eventstore.Store, func() eventstore.Store) {
			s := memory.New(nil)
			return s, func() eventstore.Store { return s }
		},
		Down: func(t *testing.T, primary eventstore.Store) (eventstore.Store, func()) {
			m := primary.(*memory.Store)
			m.SetUnavailable(true)
			return m, func() { m.SetUnavailable(false) }
		},
		Shorten: shortenMemory,
		Snapshots: func(*testing.T, eventstore.Store) eventstore.SnapshotStore {
			return &memory.Snapshots{}
		},
	})
}

// shortenMemory makes stream end at keep by losing the latest events of
// the log, which must be the stream's events past keep.
func shortenMemory(t *testing.T, s eventstore.Store, stream string, keep int64) {
	m := s.(*memory.Store)
	all, err := m.ReadAll(t.Context(), nil, m.Len())
	require.NoError(t, err)
	n := 0
	for i := len(all) - 1; i >= 0 && all[i].StreamID == stream && all[i].Version > keep; i-- {
		n++
	}
	for _, e := range all[:len(all)-n] {
		require.False(t, e.StreamID == stream && e.Version > keep, "%s@%d is not among the log's latest events", stream, e.Version)
	}
	m.LoseLast(n)
}
