package main

import (
	"cmp"
	"fmt"
	"strings"
)

// goalPart is a goal of the comparison with the peers and raw PostgreSQL,
// and what the same run measured of the part that stands in its way: part
// renders it from the run's figures ("" when they did not run).
type goalPart struct {
	figure string
	part   func(byName map[string]figure) string
}

// ratioOf renders figures' ratios as "name ratio, ...", skipping those that
// did not run.
func ratioOf(byName map[string]figure, names ...string) string {
	var out []string
	for _, n := range names {
		if f, ok := byName[n]; ok && f.Unit != "error" && f.Ratio != 0 {
			out = append(out, fmt.Sprintf("%s %.3f", n, f.Ratio))
		}
	}
	return strings.Join(out, ", ")
}

// appendParts is the append's parts, each over the prepared 1-row insert:
// opledger's without and with the streams row, and Message DB's whole write.
func appendParts(byName map[string]figure) string {
	r := ratioOf(byName, "append_part_event_row", "append_part_stream_row", "append_part_lock", "append_part_messagedb")
	if r == "" {
		return ""
	}
	return "each over the prepared 1-row insert: " + r + " (the streams row, the version check's and the head hash's home, is the difference)"
}

// goalParts are the goals docs/scaling.md's "Goals" reads, in its order.
var goalParts = []goalPart{
	{"append_1ev_c1_vs_messagedb", appendParts},
	{"append_1ev_c16_vs_messagedb", appendParts},
	{"e2e_pgqueue_vs_river", func(m map[string]figure) string {
		return ratioOf(m, "e2e_alone_vs_river", "e2e_pgqueue")
	}},
	{"e2e_kafka_vs_river", func(m map[string]figure) string {
		return ratioOf(m, "e2e_alone_vs_river", "e2e_kafka")
	}},
	{"http_claimed_c50", func(m map[string]figure) string {
		r := ratioOf(m, "http_iteration_vs_claim", "http_claimed_c50_vs_iteration")
		if r == "" {
			return ""
		}
		return r + " (the first is the most this ratio can reach whatever HTTP costs)"
	}},
	{"http_claim_p99_c50", func(m map[string]figure) string {
		f, ok := m["http_claimed_c50"]
		if !ok || f.Unit == "error" || f.Value <= 0 {
			return ""
		}
		return fmt.Sprintf("a closed loop of %d clients: mean request time %.1f ms at %s Claimed/s (Little's law)",
			httpClients, 1000*httpClients/(iterationRequests*f.Value), number(f.Value))
	}},
	{"claim_c4", func(m map[string]figure) string {
		return ratioOf(m, "append_part_event_row", "append_part_stream_row")
	}},
	{"projector_catchup", func(m map[string]figure) string {
		r := ratioOf(m, "projector_write_floor")
		if r == "" {
			return ""
		}
		return r + " (its rows alone, written at once)"
	}},
	{"audit_verify", func(map[string]figure) string { return "" }},
	{"audit_verify_rss", func(map[string]figure) string { return "" }},
}

// writeGoals writes the table of goalParts that ran: each goal, whether
// this run met it, and the same run's measure of what stands in its way.
func writeGoals(b *strings.Builder, figures []figure) {
	byName := figuresByName(figures)
	var rows []string
	for _, g := range goalParts {
		f, ok := byName[g.figure]
		if !ok || f.Unit == "error" {
			continue
		}
		got := fmt.Sprintf("%s %s", number(f.Value), f.Unit)
		if f.Ratio != 0 {
			got = fmt.Sprintf("%.3f", f.Ratio)
		}
		part := cmp.Or(g.part(byName), "—")
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s |", g.figure, escape(f.Goal), got, f.met, escape(part)))
	}
	writeSection(b, "Goals and what stands in their way", "Each goal beside the same run's measure of the part that stands in its way; docs/scaling.md (\"Goals\") says\n"+
		"what each part is and the change that would meet the goal.",
		[]string{"figure", "goal", "this run", "met", "the part that stands in the way, measured in this run"}, rows)
}
