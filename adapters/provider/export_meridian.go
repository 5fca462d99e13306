package provider

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"opledger/domain"
	"opledger/domain/audit"
)

// meridianExport reads Meridian's settlement report: CSV (RFC 4180), a
// header line naming exactly these columns in this order, then one refund
// request per line:
//
//	refund_request_id,request_id,merchant_reference,merchant_order,amount_value,currency,status,created_at
//	mrr_00000001,refund-OP-4471-a1,OP-4471,ORD-8841,12000,EUR,COMPLETED,2026-11-26T14:02:13Z
//
// Strict: every line has exactly the header's columns; refund_request_id,
// amount_value (an integer > 0), currency (three letters), status
// (COMPLETED, DECLINED or PROCESSING: an undocumented status is refused,
// not guessed) and created_at (RFC 3339) are required; every text is
// printable (domain.CheckText). A refusal names the line and the column.
// Blank lines are skipped; a line is at most MaxExportLine bytes.
type meridianExport struct{ r io.Reader }

// MeridianExport reads r as a Meridian settlement report (see
// meridianExport).
func MeridianExport(r io.Reader) audit.ProviderExport { return meridianExport{r} }

// meridianExportHeader is the report's header line.
var meridianExportHeader = []string{
	"refund_request_id", "request_id", "merchant_reference", "merchant_order", "amount_value", "currency", "status", "created_at",
}

func (x meridianExport) Records(each func(audit.ProviderRecord) error) error {
	cr := csv.NewReader(&lineLimit{r: x.r, max: MaxExportLine})
	cr.FieldsPerRecord = len(meridianExportHeader)
	cr.ReuseRecord = true
	header := true
	for n := 0; ; n++ {
		if n > maxExportLines {
			return fmt.Errorf("%w: more than %d lines", audit.ErrMalformedExport, maxExportLines)
		}
		fields, err := cr.Read()
		if errors.Is(err, io.EOF) {
			if header {
				return fmt.Errorf("%w: line 1: empty report: no header line", audit.ErrMalformedExport)
			}
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			switch {
			case errors.Is(err, errLineTooLong):
				return fmt.Errorf("%w: %w", audit.ErrMalformedExport, err)
			case errors.As(err, &pe):
				return fmt.Errorf("%w: line %d: %w", audit.ErrMalformedExport, pe.StartLine, pe.Err)
			}
			return fmt.Errorf("read provider export: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if header {
			header = false
			for i, want := range meridianExportHeader {
				if fields[i] != want {
					shown, _ := domain.EvidenceText(fields[i], domain.MaxIDLength)
					return fmt.Errorf("%w: line %d: header column %d is %q, want %q", audit.ErrMalformedExport, line, i+1, shown, want)
				}
			}
			continue
		}
		rec, err := parseMeridianExportLine(fields)
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", audit.ErrMalformedExport, line, err)
		}
		rec.Line = int64(line)
		if err := each(rec); err != nil {
			return err
		}
	}
}

func parseMeridianExportLine(f []string) (audit.ProviderRecord, error) {
	id, key, ref, order, amount, currency, status, created := f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]
	if err := checkFields(
		exportField{"refund_request_id", id, 2 * domain.MaxIDLength}, exportField{"request_id", key, 2 * domain.MaxIDLength},
		exportField{"merchant_reference", ref, domain.MaxIDLength}, exportField{"merchant_order", order, domain.MaxTextLength},
		exportField{"amount_value", amount, 20}, exportField{"currency", currency, 3},
		exportField{"status", status, domain.MaxIDLength}, exportField{"created_at", created, 64},
	); err != nil {
		return audit.ProviderRecord{}, err
	}
	if id == "" {
		return audit.ProviderRecord{}, errors.New("column refund_request_id: required")
	}
	value, err := strconv.ParseInt(amount, 10, 64)
	if err != nil || value <= 0 {
		return audit.ProviderRecord{}, fmt.Errorf("column amount_value: %q is not an integer > 0", amount)
	}
	if len(currency) != 3 || !isLetters(currency) {
		return audit.ProviderRecord{}, fmt.Errorf("column currency: %q is not a three-letter code", currency)
	}
	state := meridianState(status)
	if state == domain.EffectUnknown {
		return audit.ProviderRecord{}, fmt.Errorf("column status: %q is not COMPLETED, DECLINED or PROCESSING", status)
	}
	if _, err := time.Parse(time.RFC3339, created); err != nil {
		return audit.ProviderRecord{}, fmt.Errorf("column created_at: %q is not an RFC 3339 time", created)
	}
	return audit.ProviderRecord{
		Reference: id, OperationID: ref, IdempotencyKey: key, AmountMinor: value, Currency: currency,
		State: state, Status: status,
	}, nil
}

func isLetters(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return false
		}
	}
	return true
}
