package memory_test

import (
	"testing"

	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t,
		func(t *testing.T) eventstore.Store { return memory.New(nil) },
		storetest.WithOutage(storetest.Outage{
			Name: "switched-off",
			Start: func(t *testing.T) (eventstore.Store, func()) {
				s := memory.New(nil)
				return s, func() { s.SetUnavailable(true) }
			},
			WorksBefore: true,
		}),
	)
}
