package provider

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"opledger/domain"
	"opledger/domain/audit"
)

// Bounds of an export read.
const (
	// MaxExportLine bounds one line of a provider export; a longer line is
	// refused as malformed rather than read without end.
	MaxExportLine = 1 << 20
	// maxExportLines bounds the lines read, blank ones included.
	maxExportLines = 2 * audit.MaxProviderRefunds
)

// ExportReader returns the reader of a provider's export format for
// `audit provider-diff`: provider is a built-in profile name (stripe-v1,
// stripe-v2, meridian) or an API name (stripe, meridian). Each reader is
// strict: a record it cannot read is an error wrapping
// audit.ErrMalformedExport that names the line and the field, never skipped.
func ExportReader(provider string, r io.Reader) (audit.ProviderExport, error) {
	name := provider
	if p, ok := BuiltinProfile(provider); ok {
		name = p.API
	}
	if a, ok := apiNamed(name); ok {
		return a.Export(r), nil
	}
	shown, _ := domain.EvidenceText(provider, domain.MaxProfileNameLength)
	return nil, fmt.Errorf("no export reader for provider %q: want a profile (%s) or an api (%s)",
		shown, strings.Join(BuiltinProfileNames(), ", "), strings.Join(APIs, ", "))
}

// checkFields refuses text a report prints (domain.CheckText), naming the
// field.
func checkFields(fields ...exportField) error {
	for _, f := range fields {
		if r := domain.CheckText(f.name, f.text, f.max, false); r != nil {
			return fmt.Errorf("field %s: %s", f.name, r.Detail)
		}
	}
	return nil
}

type exportField struct {
	name, text string
	max        int
}

// errLineTooLong is returned by lineLimit past MaxExportLine.
var errLineTooLong = errors.New("line too long")

// lineLimit passes r through, failing once a line grows past max bytes: a
// reader that has no line bound of its own (encoding/csv) gets one.
type lineLimit struct {
	r    io.Reader
	max  int
	run  int   // bytes since the last newline
	line int64 // newlines seen
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.run = 0
			l.line++
			continue
		}
		l.run++
		if l.run > l.max {
			return 0, fmt.Errorf("line %d: %w: longer than %d bytes", l.line+1, errLineTooLong, l.max)
		}
	}
	return n, err
}
