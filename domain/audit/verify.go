package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"opledger/domain"
	"opledger/eventstore"
)

// ErrLimitExceeded is wrapped by Verify's error when the log needs more than
// a configured bound (open operations, operations, events). The bound, not
// the log, is then what to change, or verify a narrower window.
var ErrLimitExceeded = errors.New("audit: limit exceeded")

// VerifyOptions bounds and scopes Verify. Zero values take defaults.
type VerifyOptions struct {
	// From and To scope the check to the events strictly after From and up
	// to and including To (nil: the start, the end of the log). An
	// operation first met after From at version v > 0 has versions 0..v-1
	// read from its stream first, so its events are judged with their full
	// history; only events in the range are checked and counted.
	From, To eventstore.Position
	// PageSize is how many events one ReadAll returns (default 1000, at
	// most 10,000): the events held at once.
	PageSize int
	// MaxOpenOperations bounds the operations with an Executing, Unknown or
	// Escalated execution at once (default 250,000). Past it Verify stops
	// with ErrLimitExceeded.
	MaxOpenOperations int
	// MaxOperations bounds the operations whose compact record is kept
	// (default 2,000,000; a record is about 600 bytes for a typical
	// operation, so about 1.2 GB at the bound). Past it Verify stops with
	// ErrLimitExceeded.
	MaxOperations int
	// MaxEvents bounds the events read (default 1,000,000,000), so that a
	// log appended to faster than it is read still ends the run.
	MaxEvents int64
	// MaxViolations bounds the violations listed (default 10,000); all are
	// counted.
	MaxViolations int
	// MaxListedUnknowns bounds the open Unknowns listed (default 1,000); all
	// are counted.
	MaxListedUnknowns int

	// Digest, when set, is a signed digest the log must match: its first
	// Digest.TreeSize events unchanged, none removed, inserted or reordered
	// (D1); From and To must then be unset. Previous, when set with it, is
	// an earlier digest the later one must extend (D2). DigestKey checks
	// their signatures and is required with them.
	Digest, Previous *Digest
	DigestKey        *DigestVerifier
	// AllowUnhashed reports events stored before hashing began (see H2) as
	// information instead of violations.
	AllowUnhashed bool
	// EvidenceBound is the bound the ledger keeps evidence streams to
	// (default domain.DefaultEvidenceBound): I14 checks them against it.
	EvidenceBound domain.EvidenceBound
}

// Defaults of VerifyOptions.
const (
	DefaultPageSize          = 1000
	MaxPageSize              = 10_000
	DefaultMaxOpenOperations = 250_000
	DefaultMaxOperations     = 2_000_000
	DefaultMaxEvents         = int64(1_000_000_000)
	DefaultMaxViolations     = 10_000
	DefaultMaxListedUnknowns = 1_000
)

func (o *VerifyOptions) setDefaults() {
	o.PageSize = cmp.Or(o.PageSize, DefaultPageSize)
	o.MaxOpenOperations = cmp.Or(o.MaxOpenOperations, DefaultMaxOpenOperations)
	o.MaxOperations = cmp.Or(o.MaxOperations, DefaultMaxOperations)
	o.MaxEvents = cmp.Or(o.MaxEvents, DefaultMaxEvents)
	o.MaxViolations = cmp.Or(o.MaxViolations, DefaultMaxViolations)
	o.MaxListedUnknowns = cmp.Or(o.MaxListedUnknowns, DefaultMaxListedUnknowns)
	if o.EvidenceBound == (domain.EvidenceBound{}) {
		o.EvidenceBound = domain.DefaultEvidenceBound
	}
}

func (o *VerifyOptions) validate() error {
	switch {
	case o.PageSize < 1 || o.PageSize > MaxPageSize:
		return fmt.Errorf("audit: verify options: PageSize %d outside [1, %d]", o.PageSize, MaxPageSize)
	case o.MaxOpenOperations < 1 || o.MaxOperations < 1 || o.MaxEvents < 1:
		return errors.New("audit: verify options: MaxOpenOperations, MaxOperations and MaxEvents must be positive")
	case o.MaxViolations < 0 || o.MaxListedUnknowns < 0:
		return errors.New("audit: verify options: MaxViolations and MaxListedUnknowns must not be negative")
	case o.From != nil && o.To != nil && o.From.Compare(o.To) > 0:
		return fmt.Errorf("audit: verify options: From %s is after To %s", o.From, o.To)
	}
	if err := o.EvidenceBound.Check(); err != nil {
		return fmt.Errorf("audit: verify options: %w", err)
	}
	return o.validateDigests()
}

// Verify reads the global log once, in pages of opts.PageSize, from
// opts.From to opts.To, and checks every invariant (see Invariants) on every
// event, reporting each violation with its invariant, operation, global
// position and stream version. Every event's hash is recomputed from what
// the store returns and checked against its stored hash and its stream's
// chain (H1, H2), the store's stream heads against the log (H3), and, given
// digests, the log against them (D1, D2; see Report.Digests for where the
// log departs). It holds one compact record per operation and strings only
// for open executions (see the package documentation for the bound). It
// reads the store and nothing else, and writes nothing.
//
// An error means the range could not be checked to its end (the store
// failed, ctx ended, a bound was exceeded); the Report returned with it is
// partial (Complete is false) and must not be read as a clean bill.
func Verify(ctx context.Context, store eventstore.Store, opts VerifyOptions) (Report, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return Report{}, err
	}
	v := newVerifier(store, opts)
	tamper, err := newTamperChecks(v, opts)
	if err != nil {
		return Report{}, err
	}
	pages, stop := readAhead(ctx, store, opts.From, opts.To, opts.PageSize, opts.MaxEvents, decodeAndLink)
	defer stop()
	finish := func() (Report, error) {
		if err := tamper.finish(ctx); err != nil {
			return v.partial(), err
		}
		return v.finish(), nil
	}
	for p := range pages {
		if p.err != nil {
			return v.partial(), p.err
		}
		for i := range p.events {
			rec := &p.events[i]
			if opts.To != nil && rec.Position.Compare(opts.To) > 0 {
				return finish()
			}
			if err := v.check(ctx, rec, p.decoded[i]); err != nil {
				return v.partial(), err
			}
			if err := tamper.check(ctx, rec, p.decoded[i]); err != nil {
				return v.partial(), err
			}
		}
		p.release()
	}
	if err := ctx.Err(); err != nil { // the reading stopped because ctx ended
		return v.partial(), fmt.Errorf("verify: %w", err)
	}
	return finish()
}

func positionText(p eventstore.Position) string {
	if p == nil {
		return ""
	}
	return p.String()
}
