package audit

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
	"opledger/domain/strictjson"
)

// MaxExportLine bounds one line of a provider export; a longer line is
// refused as malformed rather than read without end.
const MaxExportLine = 1 << 20

// MaxProviderRefunds bounds the refunds ProviderDiff holds from one export
// (about 200 bytes each), and so, with blank lines, the lines it reads.
const MaxProviderRefunds = 5_000_000

// maxExportLines bounds the lines read, blank ones included.
const maxExportLines = 2 * MaxProviderRefunds

// ProviderRefund is one line of the provider's ledger export: JSON lines, one
// refund per line, as the provider simulator writes them
// (adapters/provider/sim, ExportedRefund). Each line is read strictly
// (domain/strictjson): exactly one JSON object, names matching exactly, no
// duplicate names, valid UTF-8, and every text printable (CheckText: the
// report prints them). Fields this build does not know are accepted and
// ignored (a provider's export may add some), except a name that differs
// from one of these only by case, which is refused as ambiguous.
type ProviderRefund struct {
	ID             string `json:"id"`
	OperationID    string `json:"operation_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"` // minor units
	Currency       string `json:"currency"`
	Order          string `json:"order"`
	Status         string `json:"status"` // "succeeded", "failed", "pending"
	Created        int64  `json:"created"`
}

// ProviderSucceeded is the status of a refund that took effect.
const ProviderSucceeded = "succeeded"

// ErrMalformedExport is wrapped by ProviderDiff's error for an export line it
// cannot read; the message names the line.
var ErrMalformedExport = errors.New("malformed provider export")

// readExport calls each for every refund of r, in order, with its 1-based
// line number. Blank lines are skipped; any other line that breaks a rule of
// ProviderRefund, or lacks an id or a status, is an error naming its line
// and the field at fault.
func readExport(r io.Reader, each func(line int64, p ProviderRefund) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxExportLine)
	var line int64
	for sc.Scan() {
		line++
		if line > maxExportLines {
			return fmt.Errorf("%w: more than %d lines", ErrMalformedExport, maxExportLines)
		}
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		p, err := parseExportLine(text)
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrMalformedExport, line, err)
		}
		if err := each(line, p); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%w: line %d: longer than %d bytes", ErrMalformedExport, line+1, MaxExportLine)
		}
		return fmt.Errorf("read provider export after line %d: %w", line, err)
	}
	return nil
}

// exportNames are the JSON names of ProviderRefund.
var exportNames = []string{"id", "operation_id", "idempotency_key", "amount", "currency", "order", "status", "created"}

// parseExportLine reads one non-blank line by the rules of ProviderRefund.
func parseExportLine(text []byte) (ProviderRefund, error) {
	var p ProviderRefund
	if err := strictjson.DecodeObject(text, &p, strictjson.Options{AllowUnknown: true}); err != nil {
		return ProviderRefund{}, err
	}
	if name, known := caseVariant(text); name != "" {
		safe, _ := domain.EvidenceText(name, domain.MaxIDLength)
		return ProviderRefund{}, fmt.Errorf("field %s: names match exactly: the field is %q", safe, known)
	}
	for _, f := range []struct {
		name, text string
		max        int
	}{
		{"id", p.ID, 2 * domain.MaxIDLength}, {"operation_id", p.OperationID, domain.MaxIDLength},
		{"idempotency_key", p.IdempotencyKey, 2 * domain.MaxIDLength}, {"currency", p.Currency, domain.MaxIDLength},
		{"order", p.Order, domain.MaxTextLength}, {"status", p.Status, domain.MaxIDLength},
	} {
		if r := domain.CheckText(f.name, f.text, f.max, false); r != nil {
			return ProviderRefund{}, fmt.Errorf("field %s: %s", f.name, r.Detail)
		}
	}
	switch {
	case p.ID == "":
		return ProviderRefund{}, errors.New("refund without an id")
	case p.Status == "":
		return ProviderRefund{}, fmt.Errorf("refund %s without a status", p.ID)
	}
	return p, nil
}

// caseVariant returns the first top-level name of the object text (already
// read as valid) that is not one of exportNames but equals one but for
// case, and that name. It walks the names only, skipping values: the same
// check whether encoding/json/v2 comes from the module or, under
// GOEXPERIMENT=jsonv2, from the standard library.
func caseVariant(text []byte) (name, known string) {
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
		if !slices.Contains(exportNames, n) {
			for _, k := range exportNames {
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
