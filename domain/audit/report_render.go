package audit

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// WriteJSON writes the report as one indented JSON document.
func (r Report) WriteJSON(w io.Writer) error {
	if r.Violations == nil {
		r.Violations = []Violation{}
	}
	if r.OpenUnknowns == nil {
		r.OpenUnknowns = []OpenUnknown{}
	}
	if r.ByInvariant == nil {
		r.ByInvariant = map[string]int64{}
	}
	return writeJSON(w, "report", r)
}

// WriteText writes the report for people: a verdict line, the summary, the
// violations in log order (the log order is the story) and the open
// Unknowns, oldest first.
func (r Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	verdict := "OK: no invariant broken"
	switch {
	case !r.Complete:
		verdict = fmt.Sprintf("INCOMPLETE: the range was not read to its end (%d violations so far)", r.ViolationCount)
	case r.ViolationCount > 0:
		verdict = fmt.Sprintf("FAILED: %d violations", r.ViolationCount)
	}
	fmt.Fprintf(&b, "audit verify: %s\n", verdict)
	fmt.Fprintf(&b, "range: %s .. %s (last checked %s)\n", orStart(r.From), orEnd(r.To), orNone(r.Last))
	fmt.Fprintf(&b, "events: %d (operations %d, evidence %d, other %d)", r.Events, r.OperationEvents, r.EvidenceEvents, r.OtherEvents)
	if r.PrimedEvents > 0 {
		fmt.Fprintf(&b, "; %d earlier events read for state", r.PrimedEvents)
	}
	fmt.Fprintf(&b, "\noperations: %d (at most %d with an open execution at once)\n", r.Operations, r.OpenOperationsPeak)
	e := r.Executions
	fmt.Fprintf(&b, "executions: executing %d, completed %d, not applied %d, unknown %d, escalated %d\n",
		e.Executing, e.Completed, e.NotApplied, e.Unknown, e.Escalated)
	r.writeTamperText(&b)
	if r.ViolationCount > 0 {
		b.WriteString("by invariant:")
		for _, inv := range Invariants {
			if n := r.ByInvariant[inv.ID]; n > 0 {
				fmt.Fprintf(&b, " %s=%d", inv.ID, n)
			}
		}
		b.WriteString("\n")
	}
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, "\nviolations (%d listed of %d):\n", len(r.Violations), r.ViolationCount)
		rows := make([][]string, 0, len(r.Violations))
		for _, v := range r.Violations {
			rows = append(rows, []string{v.Invariant + " " + v.Name, dash(string(v.Operation)), v.Position,
				strconv.FormatInt(v.Version, 10), v.Event, v.Message})
		}
		table(&b, []string{"Invariant", "Operation", "Position", "Ver", "Event", "Finding"}, rows)
	}
	if r.IgnoredMembers > 0 {
		fmt.Fprintf(&b, "members this build does not know, read past (information): %d events, first %s\n", r.IgnoredMembers, r.FirstIgnored)
	}
	fmt.Fprintf(&b, "\nopen unknowns (information, not violations): %d\n", r.OpenUnknownCount)
	if len(r.OpenUnknowns) > 0 {
		rows := make([][]string, 0, len(r.OpenUnknowns))
		for _, u := range r.OpenUnknowns {
			rows = append(rows, []string{string(u.Operation), string(u.Execution), string(u.State),
				u.Since.UTC().Format(TimeLayout), u.Via, u.Position, strconv.FormatInt(u.Version, 10)})
		}
		table(&b, []string{"Operation", "Execution", "State", "Since (UTC)", "Via", "Position", "Ver"}, rows)
		if n := r.OpenUnknownCount - int64(len(r.OpenUnknowns)); n > 0 {
			fmt.Fprintf(&b, "... and %d more\n", n)
		}
	}
	return writeAll(w, "report", &b)
}
