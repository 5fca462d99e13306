package ledger_test

import (
	"testing"

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
	})
}
