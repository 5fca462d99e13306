package audit

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"opledger/domain"
)

// WriteJSON writes the diff as one indented JSON document.
func (d DiffReport) WriteJSON(w io.Writer) error {
	if d.UnknownToLedger == nil {
		d.UnknownToLedger = []UnknownRefund{}
	}
	if d.UnknownToProvider == nil {
		d.UnknownToProvider = []UnknownCompletion{}
	}
	if d.Mismatches == nil {
		d.Mismatches = []DiffMismatch{}
	}
	return writeJSON(w, "provider diff", d)
}

// WriteText writes the diff for people: a verdict, the counts, then each
// list.
func (d DiffReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	verdict := "OK: the ledger and the provider agree"
	if !d.OK() {
		verdict = fmt.Sprintf("DIFFERENT: %d refunds unknown to the ledger, %d completions unknown to the provider, %d mismatches",
			d.UnknownToLedgerCount, d.UnknownToProviderCount, d.MismatchCount)
	}
	fmt.Fprintf(&b, "audit provider-diff: %s\n", verdict)
	fmt.Fprintf(&b, "provider: %d refunds (%d succeeded); ledger: %d events, %d completions, %d matched\n",
		d.ProviderRefunds, d.ProviderSucceeded, d.LedgerEvents, d.LedgerCompleted, d.Matched)
	if len(d.UnknownToLedger) > 0 {
		fmt.Fprintf(&b, "\nsucceeded at the provider, unknown to the ledger (%d):\n", d.UnknownToLedgerCount)
		rows := make([][]string, 0, len(d.UnknownToLedger))
		for _, u := range d.UnknownToLedger {
			rows = append(rows, []string{strconv.FormatInt(u.Line, 10), u.RefundID, dash(u.OperationID), dash(u.IdempotencyKey), domain.FormatMoney(u.Amount, u.Currency), u.Why})
		}
		table(&b, []string{"Line", "Refund", "Operation", "Key", "Amount", "Why"}, rows)
	}
	if len(d.UnknownToProvider) > 0 {
		fmt.Fprintf(&b, "\ncompleted in the ledger, unknown to the provider (%d):\n", d.UnknownToProviderCount)
		rows := make([][]string, 0, len(d.UnknownToProvider))
		for _, u := range d.UnknownToProvider {
			rows = append(rows, []string{string(u.Operation), string(u.Execution), dash(u.ProviderReference), u.Event, u.Position, strconv.FormatInt(u.Version, 10), u.Why})
		}
		table(&b, []string{"Operation", "Execution", "Reference", "Event", "Position", "Ver", "Why"}, rows)
	}
	if len(d.Mismatches) > 0 {
		fmt.Fprintf(&b, "\nknown to both, disagreeing (%d):\n", d.MismatchCount)
		rows := make([][]string, 0, len(d.Mismatches))
		for _, m := range d.Mismatches {
			rows = append(rows, []string{m.RefundID, strconv.FormatInt(m.Line, 10), string(m.Operation), string(m.Execution), m.Position, m.Message})
		}
		table(&b, []string{"Refund", "Line", "Operation", "Execution", "Position", "Finding"}, rows)
	}
	return writeAll(w, "provider diff", &b)
}
