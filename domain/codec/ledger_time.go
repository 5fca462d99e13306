package codec

import (
	"time"

	"opledger/eventstore"
)

// LedgerTime is when the ledger recorded e, by its own clock (the
// metadata's recorded_at), else when the store did (RecordedAt). Lag is
// measured on it, against the ledger's clock: one clock at both ends.
func LedgerTime(e eventstore.RecordedEvent) time.Time {
	if m, err := DecodeMetadata(e.Metadata); err == nil && !m.RecordedAt.IsZero() {
		return m.RecordedAt
	}
	return e.RecordedAt
}
