package provider

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/strictjson"
)

// stripeExport reads a Stripe-style export: JSON lines, one refund per line,
// as the provider simulator writes them (sim.ExportedRefund):
//
//	{"id":"re_…","operation_id":"OP-4471","idempotency_key":"refund-OP-4471-a1","amount":12000,"currency":"eur","order":"ORD-8841","status":"succeeded","created":1795701743}
//
// Each line is read strictly (domain/strictjson): exactly one JSON object,
// names matching exactly, no duplicate names, valid UTF-8, and every text
// printable (domain.CheckText: the report prints them). Fields this build
// does not know are accepted and ignored (a provider's export may add
// some), except a name that differs from one of these only by case, which
// is refused as ambiguous. Blank lines are skipped; a line without an id or
// a status is refused. The status maps onto the model's states as a
// lookup's does (stripeState).
type stripeExport struct{ r io.Reader }

// StripeExport reads r as a Stripe-style export (see stripeExport).
func StripeExport(r io.Reader) audit.ProviderExport { return stripeExport{r} }

// stripeExportLine is one line's fields.
type stripeExportLine struct {
	ID             string `json:"id"`
	OperationID    string `json:"operation_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"` // minor units
	Currency       string `json:"currency"`
	Order          string `json:"order"`
	Status         string `json:"status"`
	Created        int64  `json:"created"`
}

// stripeExportNames are the JSON names of stripeExportLine.
var stripeExportNames = []string{"id", "operation_id", "idempotency_key", "amount", "currency", "order", "status", "created"}

func (x stripeExport) Records(each func(audit.ProviderRecord) error) error {
	sc := bufio.NewScanner(x.r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxExportLine)
	var line int64
	for sc.Scan() {
		line++
		if line > maxExportLines {
			return fmt.Errorf("%w: more than %d lines", audit.ErrMalformedExport, maxExportLines)
		}
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		rec, err := parseStripeExportLine(text)
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", audit.ErrMalformedExport, line, err)
		}
		rec.Line = line
		if err := each(rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: line %d: longer than %d bytes", audit.ErrMalformedExport, line+1, MaxExportLine)
		}
		return fmt.Errorf("read provider export after line %d: %w", line, err)
	}
	return nil
}

// parseStripeExportLine reads one non-blank line by the rules of
// stripeExport.
func parseStripeExportLine(text []byte) (audit.ProviderRecord, error) {
	var p stripeExportLine
	if err := strictjson.DecodeObject(text, &p, strictjson.Options{AllowUnknown: true}); err != nil {
		return audit.ProviderRecord{}, err
	}
	if name, known := caseVariant(text, stripeExportNames); name != "" {
		safe, _ := domain.EvidenceText(name, domain.MaxIDLength)
		return audit.ProviderRecord{}, fmt.Errorf("field %s: names match exactly: the field is %q", safe, known)
	}
	if err := checkFields(
		exportField{"id", p.ID, 2 * domain.MaxIDLength}, exportField{"operation_id", p.OperationID, domain.MaxIDLength},
		exportField{"idempotency_key", p.IdempotencyKey, 2 * domain.MaxIDLength}, exportField{"currency", p.Currency, domain.MaxIDLength},
		exportField{"order", p.Order, domain.MaxTextLength}, exportField{"status", p.Status, domain.MaxIDLength},
	); err != nil {
		return audit.ProviderRecord{}, err
	}
	switch {
	case p.ID == "":
		return audit.ProviderRecord{}, errors.New("refund without an id")
	case p.Status == "":
		return audit.ProviderRecord{}, fmt.Errorf("refund %s without a status", p.ID)
	}
	return audit.ProviderRecord{
		Reference: p.ID, OperationID: p.OperationID, IdempotencyKey: p.IdempotencyKey, AmountMinor: p.Amount,
		Currency: p.Currency, State: stripeState(p.Status), Status: p.Status,
	}, nil
}

// caseVariant returns the first top-level name of the object text (already
// read as valid) that is not one of names but equals one but for case, and
// that name. It walks the names only, skipping values: the same check
// whether encoding/json/v2 comes from the module or, under
// GOEXPERIMENT=jsonv2, from the standard library.
func caseVariant(text []byte, names []string) (name, known string) {
	dec := jsontext.NewDecoder(bytes.NewReader(text))
	if _, err := dec.ReadToken(); err != nil { // '{'
		return "", ""
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", ""
		}
		n := tok.String()
		if !slices.Contains(names, n) {
			for _, k := range names {
				if strings.EqualFold(n, k) {
					return n, k
				}
			}
		}
		if err := dec.SkipValue(); err != nil {
			return "", ""
		}
	}
	return "", ""
}
