package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// (adapters/provider/sim, ExportedRefund). Fields this build does not know
// are accepted and ignored.
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
// line number. Blank lines are skipped; any other line that is not one JSON
// object with an id and a status is an error naming its line.
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
		var p ProviderRefund
		dec := json.NewDecoder(bytes.NewReader(text))
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("%w: line %d: %v", ErrMalformedExport, line, err)
		}
		if dec.More() {
			return fmt.Errorf("%w: line %d: more than one JSON value on the line", ErrMalformedExport, line)
		}
		switch {
		case p.ID == "":
			return fmt.Errorf("%w: line %d: refund without an id", ErrMalformedExport, line)
		case p.Status == "":
			return fmt.Errorf("%w: line %d: refund %s without a status", ErrMalformedExport, line, p.ID)
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
