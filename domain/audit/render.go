package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Renderers build their whole output in memory (it is bounded: the lists
// they print are capped) and write it with one call, so a failing writer is
// one wrapped error.

func writeAll(w io.Writer, what string, b *bytes.Buffer) error {
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

func writeJSON(w io.Writer, what string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	return writeAll(w, what, bytes.NewBuffer(jsonVisible(b.Bytes())))
}

// table writes rows of cells separated by " | ", aligned; the last cell of
// a row is not padded.
func table(b *bytes.Buffer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(b, 0, 0, 1, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				io.WriteString(tw, "\t| ")
			}
			io.WriteString(tw, cellText(c))
		}
		io.WriteString(tw, "\n")
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	tw.Flush() // writes to a bytes.Buffer: cannot fail
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps free text (details, evidence) from breaking a table.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ", "\t", " ").Replace(s)
}

func orStart(s string) string {
	if s == "" {
		return "start"
	}
	return s
}

func orEnd(s string) string {
	if s == "" {
		return "end"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
