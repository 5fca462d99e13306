package audit

import (
	"errors"

	"opledger/domain"
)

// MaxProviderRefunds bounds the records ProviderDiff holds from one export
// (about 200 bytes each).
const MaxProviderRefunds = 5_000_000

// ProviderRecord is one effect of a provider's export in the model's words,
// as the adapter that reads that provider's export format gives it
// (adapters/provider: one strict reader per format). The diff never reads a
// provider's format or status vocabulary itself.
type ProviderRecord struct {
	// Line is where the record is in the export (1-based), for reports.
	Line int64
	// Reference is the provider's id of the effect; required.
	Reference string
	// OperationID is our reference as the provider holds it; empty when
	// the export has none for the record.
	OperationID string
	// IdempotencyKey is the key the effect was made under; empty when the
	// export does not say.
	IdempotencyKey string
	AmountMinor    int64
	Currency       string
	// State is the effect's state; only EffectApplied counts as an effect
	// that took place.
	State domain.EffectState
	// Status is the provider's own word for State, quoted in reports.
	Status string
}

// ProviderExport is a provider's export, read by an adapter.
type ProviderExport interface {
	// Records calls each for every record, in export order, and returns
	// each's first error. A record it cannot read is never skipped: it
	// returns an error wrapping ErrMalformedExport that names the line and
	// the field at fault.
	Records(each func(ProviderRecord) error) error
}

// ErrMalformedExport is wrapped by the error for an export record that
// cannot be read (by the export's reader, or by ProviderDiff for a record
// that breaks the diff's rules); the message names the line.
var ErrMalformedExport = errors.New("malformed provider export")
