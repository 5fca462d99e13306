package audit

import (
	"context"
	"fmt"
	"strings"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// MaxDiffEntries bounds each list of a DiffReport; every entry is counted.
const MaxDiffEntries = 10_000

// UnknownRefund is a refund that succeeded at the provider and that no
// Completed execution of the ledger accounts for.
type UnknownRefund struct {
	Line           int64  `json:"line"` // in the export
	RefundID       string `json:"refund_id"`
	OperationID    string `json:"operation_id,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	// Why says what the ledger knows of the operation: nothing, a
	// completion under another reference (a second effect), or executions
	// that are not Completed.
	Why string `json:"why"`
}

// UnknownCompletion is a Completed execution of the ledger that the provider's
// export does not show.
type UnknownCompletion struct {
	Operation         domain.OperationID `json:"operation_id"`
	Execution         domain.ExecutionID `json:"execution_id"`
	ProviderReference string             `json:"provider_reference,omitempty"`
	Event             string             `json:"event"` // the event that recorded the completion
	Position          string             `json:"position"`
	Version           int64              `json:"version"`
	Why               string             `json:"why"`
}

// DiffMismatch is a refund both sides know whose facts disagree.
type DiffMismatch struct {
	RefundID  string             `json:"refund_id"`
	Line      int64              `json:"line"`
	Operation domain.OperationID `json:"operation_id"`
	Execution domain.ExecutionID `json:"execution_id"`
	Position  string             `json:"position"`
	Version   int64              `json:"version"`
	Message   string             `json:"message"`
}

// DiffReport is what ProviderDiff found.
type DiffReport struct {
	ProviderRefunds   int64 `json:"provider_refunds"`   // lines read
	ProviderSucceeded int64 `json:"provider_succeeded"` // of which succeeded
	LedgerEvents      int64 `json:"ledger_events"`
	LedgerCompleted   int64 `json:"ledger_completed"` // completion events in the ledger
	Matched           int64 `json:"matched"`          // completions matched to a provider refund

	UnknownToLedger        []UnknownRefund     `json:"unknown_to_ledger"`
	UnknownToLedgerCount   int64               `json:"unknown_to_ledger_count"`
	UnknownToProvider      []UnknownCompletion `json:"unknown_to_provider"`
	UnknownToProviderCount int64               `json:"unknown_to_provider_count"`
	Mismatches             []DiffMismatch      `json:"mismatches"`
	MismatchCount          int64               `json:"mismatch_count"`
}

// OK reports whether both sides agree: every succeeded refund is a Completed
// execution and the reverse, with the same operation, amount and currency.
func (d DiffReport) OK() bool {
	return d.UnknownToLedgerCount == 0 && d.UnknownToProviderCount == 0 && d.MismatchCount == 0
}

// refundRec is one refund of the export as the diff holds it.
type refundRec struct {
	ProviderRecord
	line      int64
	matched   bool
	matchedBy string // "operation/execution" of the completion that matched it
}

// ledgerOp is what the diff keeps of an operation the export names.
type ledgerOp struct {
	requested   bool
	amount      int64
	currency    string
	completedBy []string                                     // references of its completions
	states      map[domain.ExecutionID]domain.ExecutionState // its executions
	keys        map[domain.ExecutionID]domain.IdempotencyKey
	refunds     []*refundRec        // the export's refunds for it, in line order
	bare        []UnknownCompletion // completions without a provider reference
}

// differ is one ProviderDiff run.
type differ struct {
	refunds []*refundRec          // line order
	byID    map[string]*refundRec // refund id
	ops     map[string]*ledgerOp  // operation ids the export names
	// others are the operations of other kinds than refunds (an export
	// download's effects are not the payment provider's): their
	// completions are not compared. Bounded by the events read.
	others map[string]bool
	report DiffReport
}

// ProviderDiff compares the provider's export (read by an adapter of its
// format, see ProviderExport) with the ledger's Completed executions, read once from the
// store's global log: the completions recorded by OutcomeRecorded,
// LateOutcomeRecorded or Reconciled with outcome Completed, matched to
// refunds by provider reference (and, for a completion without one, by
// operation and idempotency key). It lists succeeded refunds the ledger does
// not account for, completions the provider does not show, and pairs whose
// operation, amount, currency or state disagree. Only records in state
// domain.EffectApplied count as effects that took place.
//
// Memory: the export's refunds (at most MaxProviderRefunds, about 200 bytes
// each) and, for the operations they name, their executions' states; the
// ledger is streamed in pages. A malformed export record is an error naming
// the line (ErrMalformedExport), never skipped: the reader's, or the diff's
// own for a record without a reference or a state, or a reference given
// twice.
func ProviderDiff(ctx context.Context, store eventstore.Store, export ProviderExport) (DiffReport, error) {
	d := &differ{byID: map[string]*refundRec{}, ops: map[string]*ledgerOp{}}
	err := export.Records(func(p ProviderRecord) error {
		line := p.Line
		switch {
		case p.Reference == "":
			return fmt.Errorf("%w: line %d: refund without a reference", ErrMalformedExport, line)
		case !p.State.Valid():
			return fmt.Errorf("%w: line %d: refund %s without a state", ErrMalformedExport, line, p.Reference)
		}
		if prev, dup := d.byID[p.Reference]; dup {
			return fmt.Errorf("%w: line %d: refund %s already on line %d", ErrMalformedExport, line, p.Reference, prev.line)
		}
		if len(d.refunds) >= MaxProviderRefunds {
			return fmt.Errorf("provider diff: %w: more than %d refunds in the export", ErrLimitExceeded, MaxProviderRefunds)
		}
		r := &refundRec{ProviderRecord: p, line: line}
		d.refunds = append(d.refunds, r)
		d.byID[p.Reference] = r
		d.report.ProviderRefunds++
		if p.State == domain.EffectApplied {
			d.report.ProviderSucceeded++
		}
		if p.OperationID != "" {
			o := d.ops[p.OperationID]
			if o == nil {
				o = &ledgerOp{}
				d.ops[p.OperationID] = o
			}
			o.refunds = append(o.refunds, r)
		}
		return nil
	})
	if err != nil {
		return DiffReport{}, fmt.Errorf("provider diff: %w", err)
	}
	if err := d.readLedger(ctx, store); err != nil {
		return d.report, err
	}
	d.finish()
	return d.report, nil
}

// readLedger streams the global log once.
func (d *differ) readLedger(ctx context.Context, store eventstore.Store) error {
	var after eventstore.Position
	for {
		if d.report.LedgerEvents >= DefaultMaxEvents {
			return fmt.Errorf("provider diff: %w: read %d ledger events and the log goes on", ErrLimitExceeded, d.report.LedgerEvents)
		}
		batch, err := store.ReadAll(ctx, after, DefaultPageSize)
		if err != nil {
			return fmt.Errorf("provider diff: read the log after %s: %w", orStart(positionText(after)), err)
		}
		for i := range batch {
			if err := d.ledgerEvent(&batch[i]); err != nil {
				return err
			}
		}
		d.report.LedgerEvents += int64(len(batch))
		if len(batch) < DefaultPageSize {
			return nil
		}
		after = batch[len(batch)-1].Position
	}
}

// ledgerEvent folds one event; only the types that bear on completions, or
// on the state of an operation the export names, are decoded.
func (d *differ) ledgerEvent(rec *eventstore.RecordedEvent) error {
	opID, ok := domain.OperationIDFromStream(rec.StreamID)
	if !ok {
		return nil
	}
	o := d.ops[string(opID)]
	if d.others[string(opID)] {
		return nil // not a refund: nothing the payment provider's export shows
	}
	switch diffReading(rec.Type) {
	case diffReadsAlways:
	case diffReadsIfNamed:
		if o == nil {
			return nil
		}
	default: // no bearing on refunds (diffIgnores), or a type this build does not know
		return nil
	}
	dec, err := codec.DecodeRecorded(*rec)
	if err != nil {
		return fmt.Errorf("provider diff: %s@%d (%s): %w", rec.StreamID, rec.Version, rec.Position, err)
	}
	e := dec.Event
	var (
		exe     domain.ExecutionID
		outcome domain.Outcome
		ref     string
	)
	switch ev := e.(type) {
	case domain.OperationRequested:
		if ev.Kind != "" && ev.Kind != domain.KindRefund {
			if d.others == nil {
				d.others = map[string]bool{}
			}
			d.others[string(opID)] = true
			return nil
		}
		if o != nil {
			o.requested, o.amount, o.currency = true, ev.AmountMinor, ev.Currency
		}
		return nil
	case domain.Claimed:
		o.state(ev.ExecutionID, domain.ExecExecuting)
		if o.keys == nil {
			o.keys = map[domain.ExecutionID]domain.IdempotencyKey{}
		}
		o.keys[ev.ExecutionID] = ev.IdempotencyKey
		return nil
	case domain.OutcomeUnknown:
		o.state(ev.ExecutionID, domain.ExecUnknown)
		return nil
	case domain.LeaseLapsed:
		o.state(ev.ExecutionID, domain.ExecUnknown)
		return nil
	case domain.Escalated:
		o.state(ev.ExecutionID, domain.ExecEscalated)
		return nil
	case domain.LostEffectEscalated:
		// An effect the store lost, handed to a person: its execution is
		// Escalated until a person's Reconciled says what it was.
		o.state(ev.ExecutionID, domain.ExecEscalated)
		if o.keys == nil {
			o.keys = map[domain.ExecutionID]domain.IdempotencyKey{}
		}
		o.keys[ev.ExecutionID] = ev.IdempotencyKey
		return nil
	case domain.OutcomeRecorded:
		exe, outcome, ref = ev.ExecutionID, ev.Outcome, ev.ProviderReference
	case domain.LateOutcomeRecorded:
		exe, outcome, ref = ev.ExecutionID, ev.Outcome, ev.ProviderReference
	case domain.Reconciled:
		exe, outcome, ref = ev.ExecutionID, ev.Outcome, ev.ProviderReference
	default:
		return fmt.Errorf("provider diff: %s@%d (%s): %w for %s", rec.StreamID, rec.Version, rec.Position, errNoDiffCase, rec.Type)
	}
	if o != nil {
		o.state(exe, domain.ExecutionState(outcome))
	}
	if outcome != domain.Completed {
		return nil
	}
	d.report.LedgerCompleted++
	c := UnknownCompletion{Operation: opID, Execution: exe, ProviderReference: ref, Event: rec.Type,
		Position: rec.Position.String(), Version: rec.Version}
	if ref == "" {
		if o == nil {
			c.Why = "completed without a provider reference, and the provider shows no refund for the operation"
			d.unknownToProvider(c)
			return nil
		}
		o.bare = append(o.bare, c)
		return nil
	}
	if o != nil {
		o.completedBy = append(o.completedBy, ref)
	}
	r := d.byID[ref]
	if r == nil {
		c.Why = "the provider's export has no refund " + ref
		d.unknownToProvider(c)
		return nil
	}
	d.match(r, c)
	return nil
}

// match pairs a completion with the refund it names and compares them.
func (d *differ) match(r *refundRec, c UnknownCompletion) {
	by := string(c.Operation) + "/" + string(c.Execution)
	if r.matched {
		if r.matchedBy != by {
			d.mismatch(r, c, "refund %s is claimed by %s and by %s", r.Reference, r.matchedBy, by)
		}
		return
	}
	r.matched, r.matchedBy = true, by
	d.report.Matched++
	if r.OperationID != string(c.Operation) {
		d.mismatch(r, c, "refund %s belongs to operation %q at the provider, to %s in the ledger", r.Reference, r.OperationID, c.Operation)
		return
	}
	if r.State != domain.EffectApplied {
		d.mismatch(r, c, "the ledger records %s Completed; the provider's refund %s is %s (%s)", c.Execution, r.Reference, r.State, r.Status)
	}
	if o := d.ops[r.OperationID]; o != nil && o.requested {
		if o.amount != r.AmountMinor || !strings.EqualFold(o.currency, r.Currency) {
			d.mismatch(r, c, "refund %s is %s at the provider; the operation asked for %s", r.Reference, domain.FormatMoney(r.AmountMinor, r.Currency), domain.FormatMoney(o.amount, o.currency))
		}
	}
}

// finish matches completions without a reference and lists the refunds
// nobody matched.
func (d *differ) finish() {
	for _, r := range d.refunds {
		o := d.ops[r.OperationID]
		if o == nil || len(o.bare) == 0 || r.matched || r.State != domain.EffectApplied {
			continue
		}
		for i, c := range o.bare {
			if key := o.keys[c.Execution]; key == "" || string(key) == r.IdempotencyKey {
				o.bare = append(o.bare[:i], o.bare[i+1:]...)
				d.match(r, c)
				break
			}
		}
	}
	for _, r := range d.refunds {
		if r.matched || r.State != domain.EffectApplied {
			continue
		}
		d.report.UnknownToLedgerCount++
		if len(d.report.UnknownToLedger) < MaxDiffEntries {
			d.report.UnknownToLedger = append(d.report.UnknownToLedger, UnknownRefund{
				Line: r.line, RefundID: r.Reference, OperationID: r.OperationID, IdempotencyKey: r.IdempotencyKey,
				Amount: r.AmountMinor, Currency: r.Currency, Why: d.ops[r.OperationID].why(r),
			})
		}
	}
	for _, r := range d.refunds { // line order keeps the output deterministic
		o := d.ops[r.OperationID]
		if o == nil || o.refunds[0] != r {
			continue
		}
		for _, c := range o.bare {
			c.Why = "completed without a provider reference, and no succeeded refund of the operation is left to match it"
			d.unknownToProvider(c)
		}
		o.bare = nil
	}
}

func (d *differ) unknownToProvider(c UnknownCompletion) {
	d.report.UnknownToProviderCount++
	if len(d.report.UnknownToProvider) < MaxDiffEntries {
		d.report.UnknownToProvider = append(d.report.UnknownToProvider, c)
	}
}

func (d *differ) mismatch(r *refundRec, c UnknownCompletion, format string, args ...any) {
	d.report.MismatchCount++
	if len(d.report.Mismatches) < MaxDiffEntries {
		d.report.Mismatches = append(d.report.Mismatches, DiffMismatch{
			RefundID: r.Reference, Line: r.line, Operation: c.Operation, Execution: c.Execution, Position: c.Position,
			Version: c.Version, Message: fmt.Sprintf(format, args...),
		})
	}
}

func (o *ledgerOp) state(x domain.ExecutionID, s domain.ExecutionState) {
	if o.states == nil {
		o.states = map[domain.ExecutionID]domain.ExecutionState{}
	}
	o.states[x] = s
}

// why explains an unmatched succeeded refund from what the ledger knows of
// its operation.
func (o *ledgerOp) why(r *refundRec) string {
	switch {
	case r.OperationID == "":
		return "the refund names no operation (no metadata operation_id)"
	case o == nil || !o.requested:
		return "the ledger has no operation " + r.OperationID
	case len(o.states) == 0:
		return "the ledger has no execution for the operation"
	}
	counts := map[domain.ExecutionState]int{}
	for _, s := range o.states {
		counts[s]++
	}
	switch {
	case len(o.completedBy) > 0:
		return "a second refund: the ledger completed the operation with " + strings.Join(o.completedBy, ", ")
	case counts[domain.ExecCompleted] > 0:
		return "a second refund: the ledger completed the operation (without a provider reference)"
	}
	var parts []string
	for _, s := range []domain.ExecutionState{domain.ExecExecuting, domain.ExecUnknown, domain.ExecEscalated, domain.ExecNotApplied, domain.ExecCompleted} {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return "no Completed execution in the ledger (executions: " + strings.Join(parts, ", ") + ")"
}
