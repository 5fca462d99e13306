package main

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"
)

// writeReport writes BENCHMARKS.md: the machine, the date, the commands
// and the table.
func writeReport(path string, s *settings, m machine, figures []figure, elapsed time.Duration) error {
	var b strings.Builder
	mode := "full"
	if s.quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, "# Benchmarks\n\n")
	fmt.Fprintf(&b, "Written by `scripts/bench.sh` (%s run, %s). Every figure is the median of %d samples, each\n", mode, elapsed.Round(time.Second), s.rounds)
	fmt.Fprintf(&b, "taken right after (or before) a sample of its baseline on the same server in the same run\n")
	fmt.Fprintf(&b, "(A, B, A, B, ...); the ratio is opledger's median over the baseline's (for times: the\n")
	fmt.Fprintf(&b, "baseline's over opledger's, so that above 1 is always better than the baseline). Goals are\n")
	fmt.Fprintf(&b, "goals, never test assertions; `met` says whether this run reached them.\n\n")
	fmt.Fprintf(&b, "## Machine\n\n")
	fmt.Fprintf(&b, "- date: %s\n", m.date.Format(time.RFC3339))
	fmt.Fprintf(&b, "- CPU: %d cores, %s; memory %s\n", m.cores, m.cpu, m.memory)
	fmt.Fprintf(&b, "- PostgreSQL %s (%s), local, over TCP loopback\n", m.postgres, m.settings)
	fmt.Fprintf(&b, "- %s; load average %s before the run, %s after it (other processes share the machine:\n", m.goVersion, m.loadBefore, m.loadAfter)
	fmt.Fprintf(&b, "  read the ratios, which compare samples taken moments apart, rather than the absolute figures)\n\n")
	fmt.Fprintf(&b, "## Commands\n\n```sh\n")
	for _, c := range s.commands {
		fmt.Fprintf(&b, "%s\n", c)
	}
	fmt.Fprintf(&b, "```\n\n")
	fmt.Fprintf(&b, "## Figures\n\n")
	fmt.Fprintf(&b, "| figure | opledger | same-run baseline | ratio | goal | met | spread (ours / baseline) |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range figures {
		if f.Unit == "error" {
			fmt.Fprintf(&b, "| %s | error: %s | | | | | |\n", f.Figure, escape(f.note))
			continue
		}
		base := "—"
		if f.Baseline != "" {
			base = fmt.Sprintf("%s: %s", f.Baseline, number(f.BaselineValue))
		}
		ratio := "—"
		if f.Ratio != 0 {
			ratio = fmt.Sprintf("%.3f", f.Ratio)
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s | %s |\n", f.Figure, number(f.Value), f.Unit, base, ratio,
			escape(f.Goal), f.met, f.spread)
	}
	writePeers(&b, figures)
	writeGoals(&b, figures)
	var notes []string
	for _, f := range figures {
		if f.note != "" && f.Unit != "error" {
			notes = append(notes, fmt.Sprintf("- %s: %s", f.Figure, f.note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, "\nNotes:\n\n%s\n", strings.Join(notes, "\n"))
	}
	fmt.Fprintf(&b, "\nWhat the figures mean, where the time goes and how a deployment grows past one PostgreSQL:\n[docs/scaling.md](docs/scaling.md).\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// peerFigures are the figures that set opledger beside a system a team
// would pick instead, in the order BENCHMARKS.md lists them, with the part
// that stands in the way of each goal measured in the same run.
var peerFigures = []struct{ name, work, part string }{
	{"append_1ev_c1_vs_messagedb", "append 1 event at the expected version, 1 client", "append_part_messagedb beside append_part_*"},
	{"append_1ev_c16_vs_messagedb", "the same, 16 clients, a stream (and a category) each", ""},
	{"e2e_pgqueue_vs_river", "one refund end to end on the Postgres queue", "e2e_alone_vs_river"},
	{"e2e_kafka_vs_river", "one refund end to end on Kafka (kfake)", "e2e_alone_vs_river"},
}

// writePeers writes the table of opledger beside its peers (the figures
// of peerFigures that ran), each peer's guarantees in the notes.
func writePeers(b *strings.Builder, figures []figure) {
	byName := figuresByName(figures)
	var rows []string
	for _, p := range peerFigures {
		f, ok := byName[p.name]
		if !ok {
			continue
		}
		if f.Unit == "error" {
			rows = append(rows, fmt.Sprintf("| %s | error: %s | | | | |", p.work, escape(f.note)))
			continue
		}
		part := cmp.Or(p.part, "—")
		rows = append(rows, fmt.Sprintf("| %s | %s %s | %s: %s | %.3f | %s %s | %s |", p.work, number(f.Value), f.Unit, f.Baseline,
			number(f.BaselineValue), f.Ratio, escape(f.Goal), f.met, part))
	}
	writeSection(b, "Beside the peers", "The same run's samples, interleaved with opledger's; what each peer does and does not guarantee is in the notes\n"+
		"below its figure (docs/scaling.md, \"Beside the peers\", reads them).",
		[]string{"work", "opledger", "peer", "opledger ÷ peer", "goal, met", "the part that stands in the way"}, rows)
}

// figuresByName indexes figures by name.
func figuresByName(figures []figure) map[string]figure {
	byName := make(map[string]figure, len(figures))
	for _, f := range figures {
		byName[f.Figure] = f
	}
	return byName
}

// writeSection writes a section of BENCHMARKS.md holding one table, unless
// it has no rows.
func writeSection(b *strings.Builder, title, intro string, columns, rows []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## %s\n\n%s\n\n", title, intro)
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(columns, " | "), strings.Repeat(" --- |", len(columns)))
	fmt.Fprintf(b, "%s\n", strings.Join(rows, "\n"))
}

func number(x float64) string {
	switch {
	case x >= 1000:
		s := fmt.Sprintf("%.0f", x)
		var out []byte
		for i := range len(s) {
			if i > 0 && (len(s)-i)%3 == 0 {
				out = append(out, ',')
			}
			out = append(out, s[i])
		}
		return string(out)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.4g", x)
}

func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
