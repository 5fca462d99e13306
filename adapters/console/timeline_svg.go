package console

import (
	"strings"

	"opledger/domain/audit"
)

// The sequence diagram's geometry, in CSS pixels. The diagram keeps its
// natural width (it scrolls sideways in a narrow window) so its text stays
// readable at any window width.
const (
	svgTimeColumn = 96 // the time and version column at the left
	// Lanes are spread to fill svgFitWidth (the content of a 1280 px
	// window), between svgMinLane and svgMaxLane apart.
	svgFitWidth  = 1230
	svgMinLane   = 112
	svgMaxLane   = 150
	svgHeader    = 52 // the lanes' titles
	svgRow       = 34 // one step
	svgDayRow    = 26 // a new day's separator
	svgPad       = 16
	svgCharWidth = 6.6 // an estimate of one character of the 12 px label font
	svgMaxLabel  = 72  // characters of a label; the full text is its title
)

// timelineSVG is the diagram as the template draws it.
type timelineSVG struct {
	Width, Height int
	Lanes         []svgLane
	Steps         []svgStep
	Days          []svgDay
	// Bottom is where the lifelines end.
	Bottom int
}

type svgLane struct {
	X          int
	Title      string
	Kind       string
	BoxX, BoxW int
}

type svgStep struct {
	Y           int
	X1, X2      int
	LabelX      int
	LabelY      int
	Label       string
	Title       string // the full label and note, for a tooltip and screen readers
	Class       string // step-call step-reply step-refused step-inferred, and the tone
	Marker      string // arrow | cross
	Note        bool   // a step on one lane: a box, no arrow
	NoteX       int
	NoteY       int
	NoteW       int
	Time        string // shown when it differs from the step before
	Version     int64
	ShowVersion bool
}

type svgDay struct {
	Y    int
	Text string
}

// drawTimeline lays seq out: lanes left to right in the model's order, one
// row per step, a separator at each new day.
func drawTimeline(seq audit.Sequence) timelineSVG {
	t := timelineSVG{}
	x := map[string]int{}
	lane := min(svgMaxLane, max(svgMinLane, (svgFitWidth-svgTimeColumn-svgPad)/max(1, len(seq.Lanes))))
	for i, l := range seq.Lanes {
		cx := svgTimeColumn + lane/2 + i*lane
		x[l.ID] = cx
		t.Lanes = append(t.Lanes, svgLane{X: cx, Title: clip(l.Title, 18), Kind: string(l.Kind), BoxX: cx - lane/2 + 6, BoxW: lane - 12})
	}
	t.Width = svgTimeColumn + len(seq.Lanes)*lane + svgPad
	y := svgHeader + svgPad
	day, lastTime := "", ""
	lastVersion := int64(-1)
	for _, s := range seq.Steps {
		if d := s.Time.UTC().Format("Mon 2006-01-02"); d != day {
			day = d
			t.Days = append(t.Days, svgDay{Y: y + 4, Text: d + " (UTC)"})
			y += svgDayRow
		}
		st := svgStep{Y: y + svgRow/2 + 6, Label: clip(s.Label, svgMaxLabel), Title: s.Label, Version: s.Version,
			Class: "step-" + string(s.Style), Marker: "arrow"}
		if s.Note != "" {
			st.Title += " — " + s.Note
		}
		if s.Tone != audit.ToneNormal {
			st.Class += " tone-" + string(s.Tone)
			st.Marker += "-" + string(s.Tone)
		}
		if s.Style == audit.StepRefused {
			st.Marker = "cross"
		}
		if tm := s.Time.UTC().Format("15:04:05"); tm != lastTime {
			st.Time, lastTime = tm, tm
		}
		if s.Version != lastVersion {
			st.ShowVersion, lastVersion = true, s.Version
		}
		x1, x2 := x[s.From], x[s.To]
		width := int(float64(len([]rune(st.Label)))*svgCharWidth) + 12
		if s.From == s.To {
			st.Note = true
			st.NoteW = max(width, lane-12)
			st.NoteX = clampInt(x1-st.NoteW/2, svgTimeColumn, t.Width-svgPad-st.NoteW)
			st.LabelX = st.NoteX + st.NoteW/2
			st.LabelY = st.Y + 4
			st.NoteY = st.Y - 10
		} else {
			// The arrow stops short of the lifeline so its head is seen.
			if x2 > x1 {
				st.X1, st.X2 = x1+2, x2-4
			} else {
				st.X1, st.X2 = x1-2, x2+4
			}
			// The label sits above the arrow's middle, kept inside the
			// diagram.
			mid := (x1 + x2) / 2
			half := width / 2
			st.LabelX = clampInt(mid, svgTimeColumn+half, t.Width-svgPad-half)
			st.LabelY = st.Y - 6
		}
		t.Steps = append(t.Steps, st)
		y += svgRow
	}
	t.Bottom = y + svgPad/2
	t.Height = t.Bottom + svgPad
	return t
}

func clampInt(v, lo, hi int) int {
	if hi < lo {
		return lo
	}
	return min(max(v, lo), hi)
}

// clip cuts s to n runes, ending in "…" when cut.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
