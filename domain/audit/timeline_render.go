package audit

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

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
	fmt.Fprintf(&b, "Operation %s: %d events in stream %s\n\n", op, len(rows), op.StreamName())
	cells := make([][]string, 0, len(rows))
	for _, r := range rows {
		cells = append(cells, []string{
			strconv.FormatInt(r.Version, 10), r.Time.UTC().Format(TimeLayout), r.Event, dash(r.Actor),
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

func epoch(r TimelineRow) string {
	switch {
	case r.EpochFrom != 0:
		return strconv.FormatInt(r.EpochFrom, 10) + "→" + strconv.FormatInt(r.Epoch, 10)
	case r.Epoch != 0:
		return strconv.FormatInt(r.Epoch, 10)
	}
	return "-"
}
