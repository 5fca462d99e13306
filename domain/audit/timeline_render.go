package audit

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"opledger/domain"
)

// TimeLayout is how the text renderers print a time: weekday, date and time
// of day in UTC, to the millisecond.
const TimeLayout = "Mon 2006-01-02 15:04:05.000"

// WriteTimelineText renders rows as a table in the manner of the seed
// story's "When (UTC) | What happens" table, one line per event, with the
// columns a replay needs: version, time, event, actor, execution, epoch,
// message, capability, outcome, reason and detail.
func WriteTimelineText(w io.Writer, op domain.OperationID, rows []TimelineRow) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Operation %s: %d events in %s\n\n", op, len(rows), streamsOf(op, rows))
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		cells = append(cells, []string{
			rowNumber(r), r.Time.UTC().Format(TimeLayout), r.Event, dash(r.Actor),
			dash(string(r.Execution)), epoch(r), dash(string(r.Message)), dash(string(r.Capability)),
			dash(r.Outcome), dash(r.Reason), r.Detail,
		})
	}
	table(&b, []string{"#", "When (UTC)", "Event", "By", "Execution", "Epoch", "Message", "Capability", "Outcome", "Reason", "Detail"}, cells)
	return writeAll(w, "timeline", &b)
}

// TimelineJSON is the JSON document WriteTimelineJSON writes.
type TimelineJSON struct {
	OperationID domain.OperationID `json:"operation_id"`
	Stream      string             `json:"stream"`
	Events      int                `json:"events"`
	Rows        []TimelineRow      `json:"rows"`
}

// WriteTimelineJSON renders rows as one indented JSON document (TimelineJSON).
func WriteTimelineJSON(w io.Writer, op domain.OperationID, rows []TimelineRow) error {
	if rows == nil {
		rows = []TimelineRow{}
	}
	return writeJSON(w, "timeline", TimelineJSON{OperationID: op, Stream: op.StreamName(), Events: len(rows), Rows: rows})
}

// streamsOf names the streams rows come from: "stream operation-OP-1",
// or "streams operation-OP-1 and evidence-OP-1" when the operation's
// evidence stream holds some of them.
func streamsOf(op domain.OperationID, rows []TimelineRow) string {
	for _, r := range rows {
		if r.Stream != "" {
			return "streams " + op.StreamName() + " and " + r.Stream
		}
	}
	return "stream " + op.StreamName()
}

// rowNumber is a row's version in its stream: "7" in the operation's
// stream, "e7" in its evidence stream.
func rowNumber(r TimelineRow) string {
	if r.Stream != "" {
		return "e" + strconv.FormatInt(r.Version, 10)
	}
	return strconv.FormatInt(r.Version, 10)
}

func epoch(r TimelineRow) string {
	switch {
	case r.EpochFrom != 0:
		return strconv.FormatInt(r.EpochFrom, 10) + "→" + strconv.FormatInt(r.Epoch, 10)
	case r.Epoch != 0:
		return strconv.FormatInt(r.Epoch, 10)
	}
	return "-"
}

// DefaultTableWidth is the width WriteTimelineTable fits by default: a
// terminal of 120 columns.
const DefaultTableWidth = 120

// minTableWidth is the narrowest table WriteTimelineTable lays out; below
// it the columns stop shrinking (the detail lines still wrap).
const minTableWidth = 60

// tableColumn is one column of the narrow table and how far it may shrink.
type tableColumn struct {
	title    string
	max, min int
}

var narrowColumns = []tableColumn{
	{"#", 6, 1}, {"Time", 12, 8}, {"Event", 20, 8}, {"By", 16, 6}, {"Execution", 16, 6}, {"Epoch", 7, 3}, {"Outcome", 17, 7},
}

// WriteTimelineTable renders rows to fit width columns (DefaultTableWidth
// when width <= 0): one line per event with version, time of day, event,
// actor, execution, epoch and outcome, cells longer than their column
// elided with "…"; under it the reason, message, capability and detail,
// wrapped. A line naming the date starts each day. WriteTimelineText keeps
// every field on one wide line.
func WriteTimelineTable(w io.Writer, op domain.OperationID, rows []TimelineRow, width int) error {
	if width <= 0 {
		width = DefaultTableWidth
	}
	width = max(width, minTableWidth)
	var b bytes.Buffer
	fmt.Fprintf(&b, "Operation %s: %d events in %s\n", op, len(rows), streamsOf(op, rows))
	cols := fitColumns(narrowColumns, width)
	cells := make([][]string, len(rows))
	for i, r := range rows {
		cells[i] = []string{rowNumber(r), r.Time.UTC().Format("15:04:05.000"), r.Event, dash(r.Actor),
			dash(string(r.Execution)), epoch(r), dash(r.Outcome)}
	}
	// Each column is as wide as its widest cell, within its bound.
	widths := make([]int, len(cols))
	for j, c := range cols {
		widths[j] = min(c.max, runeLen(c.title))
		for _, row := range cells {
			widths[j] = max(widths[j], min(c.max, runeLen(cellText(row[j]))))
		}
	}
	line := func(cells []string) {
		var l strings.Builder
		for j, c := range cells {
			if j > 0 {
				l.WriteString(" | ")
			}
			cell := elide(cellText(c), widths[j])
			l.WriteString(cell)
			if j < len(cells)-1 {
				l.WriteString(strings.Repeat(" ", widths[j]-runeLen(cell)))
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	titles := make([]string, len(cols))
	for j, c := range cols {
		titles[j] = c.title
	}
	const indent = "    "
	var day string
	for i, r := range rows {
		if d := r.Time.UTC().Format("Mon 2006-01-02"); d != day {
			day = d
			b.WriteString("\n" + d + " (UTC)\n")
			line(titles)
		}
		line(cells[i])
		var more []string
		if r.Reason != "" {
			more = append(more, cellText(r.Reason))
		}
		if r.Message != "" {
			more = append(more, "message "+cellText(string(r.Message)))
		}
		if r.Capability != "" {
			more = append(more, "capability "+cellText(string(r.Capability)))
		}
		if r.Detail != "" {
			more = append(more, cellText(r.Detail))
		}
		for _, l := range wrap(strings.Join(more, " · "), width-len(indent)) {
			b.WriteString(indent + l + "\n")
		}
	}
	return writeAll(w, "timeline", &b)
}

// fitColumns shrinks the widest shrinkable columns, one rune at a time,
// until the row fits width (separators included) or none can shrink.
func fitColumns(cols []tableColumn, width int) []tableColumn {
	out := append([]tableColumn(nil), cols...)
	total := func() int {
		n := 3 * (len(out) - 1)
		for _, c := range out {
			n += c.max
		}
		return n
	}
	for total() > width { // each round shrinks one column by one: bounded by the columns' slack
		widest := -1
		for j, c := range out {
			if c.max > c.min && (widest < 0 || c.max > out[widest].max) {
				widest = j
			}
		}
		if widest < 0 {
			break
		}
		out[widest].max--
	}
	return out
}

func runeLen(s string) int { return len([]rune(s)) }

// elide cuts s to n runes, ending in "…" when cut.
func elide(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return string(r[:n])
	}
	return string(r[:n-1]) + "…"
}

// wrap breaks s into lines of at most n runes at spaces; a word longer than
// n is split.
func wrap(s string, n int) []string {
	if s == "" {
		return nil
	}
	var lines []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		w := []rune(word)
		for len(w) > n { // bounded: each round takes n runes off the word
			if len(cur) > 0 {
				lines, cur = append(lines, string(cur)), nil
			}
			lines, w = append(lines, string(w[:n])), w[n:]
		}
		switch {
		case len(cur) == 0:
			cur = w
		case len(cur)+1+len(w) <= n:
			cur = append(append(cur, ' '), w...)
		default:
			lines, cur = append(lines, string(cur)), w
		}
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return lines
}

// maxMermaidLabel bounds one arrow's text in the Mermaid diagram.
const maxMermaidLabel = 90

// WriteTimelineMermaid renders rows as a Mermaid sequence diagram
// (SequenceOf: the lanes and steps the console draws), each arrow starting
// with the time of day, a note at each new day. Paste it into any Mermaid
// renderer (GitHub renders ```mermaid blocks).
func WriteTimelineMermaid(w io.Writer, op domain.OperationID, rows []TimelineRow) error {
	seq := SequenceOf(rows)
	var b bytes.Buffer
	b.WriteString("sequenceDiagram\n")
	fmt.Fprintf(&b, "    title %s\n", mermaidText(fmt.Sprintf("%s: %d events in %s", op, len(rows), streamsOf(op, rows))))
	alias := map[string]string{}
	workers, operators := 0, 0
	for _, l := range seq.Lanes {
		id := l.ID
		switch l.Kind {
		case LaneWorker:
			workers++
			id = "w" + strconv.Itoa(workers)
		case LaneOperator:
			operators++
			id = "op" + strconv.Itoa(operators)
		}
		alias[l.ID] = id
		fmt.Fprintf(&b, "    participant %s as %s\n", id, mermaidLane(l.Title))
	}
	var day string
	for _, s := range seq.Steps {
		if d := s.Time.UTC().Format("Mon 2006-01-02"); d != day && len(seq.Lanes) > 0 {
			day = d
			fmt.Fprintf(&b, "    Note over %s,%s: %s (UTC)\n", alias[seq.Lanes[0].ID], alias[seq.Lanes[len(seq.Lanes)-1].ID], d)
		}
		arrow := "->>"
		label := s.Label
		switch s.Style {
		case StepReply:
			arrow = "-->>"
		case StepRefused:
			arrow = "-x"
		case StepInferred:
			arrow, label = "-->>", label+" (not recorded)"
		}
		text := mermaidText(elide(s.Time.UTC().Format("15:04:05")+" "+label, maxMermaidLabel))
		if s.From == s.To {
			fmt.Fprintf(&b, "    Note over %s: %s\n", alias[s.From], text)
			continue
		}
		fmt.Fprintf(&b, "    %s%s%s: %s\n", alias[s.From], arrow, alias[s.To], text)
	}
	return writeAll(w, "timeline", &b)
}
