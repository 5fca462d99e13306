package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// ledgerCause is the cause of what tests do through the ledger directly.
var ledgerCause = ledger.Cause{Actor: "test"}

func decode(t *testing.T, rec eventstore.RecordedEvent) domain.Event {
	t.Helper()
	dec, err := codec.DecodeRecorded(rec)
	require.NoError(t, err)
	e := dec.Event
	return e
}
