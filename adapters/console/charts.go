package console

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"opledger/projections"
)

// The pictures of the last hour and the last day on the health page and
// the operations list: operations per minute by state, executions Unknown
// and Escalated over time, and how far the projector and the relays
// trailed the log — drawn on the server as SVG from the read models.

// chartWindow is a span the pictures cover, and the width of one bar.
type chartWindow struct {
	Name, Label string
	Span, Step  time.Duration
}

// chartWindows: the hour in minutes, the day in quarter hours (96 bars
// stay readable at 390 px).
var chartWindows = []chartWindow{
	{Name: "hour", Label: "Last hour", Span: time.Hour, Step: time.Minute},
	{Name: "day", Label: "Last day", Span: 24 * time.Hour, Step: 15 * time.Minute},
}

// The chart's geometry, in the SVG's own units: it scales to the width of
// its box, and at 390 px its text is about 11 px.
const (
	chartW      = 360
	chartH      = 150
	chartLeft   = 44 // the y labels
	chartRight  = 8
	chartTop    = 10
	chartBottom = 22 // the x labels
)

// operationStateOrder stacks the bars: settled at the bottom, what needs a
// person on top.
var operationStateOrder = []string{"Completed", "NotApplied", "Denied", "Requested", "Authorized", "Executing", "Unknown", "Escalated"}

type chartsView struct {
	Window  chartWindow
	Windows []chartLink
	From    time.Time
	To      time.Time
	Charts  []chart
}

type chartLink struct {
	Label, Href string
	Current     bool
}

type chart struct {
	ID, Title, Note string
	// Summary says in words what the picture shows (for screen readers,
	// and the tests).
	Summary string
	W, H    int
	YTicks  []chartTick
	XTicks  []chartTick
	Bars    []chartBar
	Lines   []chartLine
	Legend  []chartLegend
	// Empty, when set, is said instead of the picture.
	Empty string
	Error string
}

type chartTick struct {
	X, Y  float64
	Label string
	// Anchor is the label's text-anchor: the first and last time labels
	// keep inside the picture.
	Anchor string
}

type chartBar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type chartLine struct {
	Class  string
	Points string
}

type chartLegend struct{ Class, Label string }

// chartsFor reads what the pictures need for the window the request names
// (?span=hour|day; default hour), with the lag picture when lag is set.
func (c *Console) chartsFor(ctx context.Context, r *http.Request, lag bool) (chartsView, error) {
	name := r.URL.Query().Get("span")
	w := chartWindows[0]
	if name != "" {
		i := slices.IndexFunc(chartWindows, func(w chartWindow) bool { return w.Name == name })
		if i < 0 {
			return chartsView{}, badRequest("span must be hour or day")
		}
		w = chartWindows[i]
	}
	now := c.ledgerNow()
	to := now.Truncate(w.Step).Add(w.Step)
	v := chartsView{Window: w, From: to.Add(-w.Span), To: to}
	for _, o := range chartWindows {
		q := r.URL.Query()
		q.Set("span", o.Name)
		q.Del("after")
		v.Windows = append(v.Windows, chartLink{Label: o.Label, Href: r.URL.Path + "?" + q.Encode(), Current: o.Name == w.Name})
	}
	v.Charts = append(v.Charts, c.operationsChart(ctx, v), c.doubtChart(ctx, v, now))
	if lag {
		v.Charts = append(v.Charts, c.lagChart(ctx, v, now))
	}
	return v, nil
}

// buckets is how many bars the window has.
func (v chartsView) buckets() int { return int(v.Window.Span / v.Window.Step) }

// x is the horizontal place of t.
func (v chartsView) x(t time.Time) float64 {
	f := float64(t.Sub(v.From)) / float64(v.Window.Span)
	return chartLeft + f*(chartW-chartLeft-chartRight)
}

// y is the vertical place of value on a scale of 0..top.
func y(value, top float64) float64 {
	plot := float64(chartH - chartTop - chartBottom)
	return chartTop + plot - value/top*plot
}

// newChart is an empty chart with the window's time axis.
func (v chartsView) newChart(id, title, note string) chart {
	ch := chart{ID: id, Title: title, Note: note, W: chartW, H: chartH}
	ticks := 4
	for i := 0; i <= ticks; i++ {
		t := v.From.Add(time.Duration(i) * v.Window.Span / time.Duration(ticks))
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case ticks:
			anchor = "end"
		}
		ch.XTicks = append(ch.XTicks, chartTick{X: v.x(t), Y: chartH - 6, Label: t.UTC().Format("15:04"), Anchor: anchor})
	}
	return ch
}

// scale sets the y axis for values up to top (rounded up to 1, 2 or 5
// times a power of ten) and returns it.
func (ch *chart) scale(top float64, format func(float64) string) float64 {
	top = niceCeiling(top)
	for _, f := range []float64{0, 0.5, 1} {
		ch.YTicks = append(ch.YTicks, chartTick{X: chartLeft - 4, Y: y(f*top, top), Label: format(f * top)})
	}
	return top
}

func niceCeiling(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func formatCount(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// formatSeconds is a lag on the y axis, short: 45s, 100s, 15m, 2h.
func formatSeconds(v float64) string {
	switch {
	case v < 1000:
		return formatCount(v) + "s"
	case v < 3*3600:
		return formatCount(math.Round(v/6)/10) + "m"
	}
	return formatCount(math.Round(v/360)/10) + "h"
}

// stepText says how wide a bar is: "minute", "15 minutes".
func stepText(d time.Duration) string {
	if d == time.Minute {
		return "minute"
	}
	return strconv.Itoa(int(d.Minutes())) + " minutes"
}

func stateClass(state string) string { return "s-" + strings.ToLower(state) }

// operationsChart: operations requested per minute, each bar stacked by
// the state its operations are in now.
func (c *Console) operationsChart(ctx context.Context, v chartsView) chart {
	perMinute := v.Window.Step.Minutes()
	ch := v.newChart("operations", "Operations per minute, by state now",
		"requested in each "+stepText(v.Window.Step)+", coloured by the state they are in now")
	counts, err := c.cfg.Reads.OperationsByState(ctx, v.From, v.To, v.Window.Step)
	if err != nil {
		ch.Error = "The read models cannot be read: " + err.Error()
		return ch
	}
	byBucket := map[time.Time]map[string]int64{}
	seen := map[string]bool{}
	total, top := int64(0), 0.0
	for _, n := range counts {
		if byBucket[n.Bucket] == nil {
			byBucket[n.Bucket] = map[string]int64{}
		}
		byBucket[n.Bucket][n.State] += n.Count
		seen[n.State] = true
		total += n.Count
	}
	for _, states := range byBucket {
		sum := int64(0)
		for _, n := range states {
			sum += n
		}
		top = max(top, float64(sum)/perMinute)
	}
	if total == 0 {
		ch.Empty = "No operation was requested in this window."
		ch.Summary = ch.Empty
		return ch
	}
	most := top
	top = ch.scale(top, formatCount)
	width := (chartW - chartLeft - chartRight) / float64(v.buckets())
	for b, states := range byBucket {
		base := 0.0
		var parts []string
		for _, st := range operationStateOrder {
			n := states[st]
			if n == 0 {
				continue
			}
			rate := float64(n) / perMinute
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
			ch.Bars = append(ch.Bars, chartBar{X: v.x(b) + 0.5, W: max(width-1, 0.8), Y: y(base+rate, top), H: y(base, top) - y(base+rate, top),
				Class: stateClass(st)})
			base += rate
		}
		title := b.UTC().Format("15:04") + ": " + strings.Join(parts, ", ")
		for i := len(ch.Bars) - len(parts); i < len(ch.Bars); i++ {
			ch.Bars[i].Title = title
		}
	}
	slices.SortFunc(ch.Bars, func(a, b chartBar) int { return int(a.X*100) - int(b.X*100) })
	for _, st := range operationStateOrder {
		if seen[st] {
			ch.Legend = append(ch.Legend, chartLegend{Class: stateClass(st), Label: st})
		}
	}
	ch.Summary = fmt.Sprintf("%d operations requested between %s and %s UTC, at most %s a minute", total,
		v.From.UTC().Format("15:04"), v.To.UTC().Format("15:04"), formatCount(most))
	return ch
}

// doubtChart: how many executions were Unknown, and how many Escalated,
// at the end of each bar's time.
func (c *Console) doubtChart(ctx context.Context, v chartsView, now time.Time) chart {
	ch := v.newChart("doubt", "Unknown and escalated executions", "how many there were at each moment")
	spans, capped, err := c.cfg.Reads.DoubtSpans(ctx, v.From, v.To)
	if err != nil {
		ch.Error = "The read models cannot be read: " + err.Error()
		return ch
	}
	if capped {
		ch.Note += fmt.Sprintf(" (the first %d executions found)", projections.MaxHistoryRows)
	}
	var times []time.Time
	for t := v.From; !t.After(v.To) && !t.After(now); t = t.Add(v.Window.Step) {
		times = append(times, t)
	}
	times = append(times, now)
	unknown, escalated := make([]float64, len(times)), make([]float64, len(times))
	top, last := 0.0, [2]float64{}
	for i, t := range times {
		for _, s := range spans {
			if s.UnknownAt(t) {
				unknown[i]++
			}
			if s.EscalatedAtTime(t) {
				escalated[i]++
			}
		}
		top = max(top, unknown[i], escalated[i])
		last = [2]float64{unknown[i], escalated[i]}
	}
	if top == 0 {
		ch.Empty = "No execution was Unknown or escalated in this window."
		ch.Summary = ch.Empty
		return ch
	}
	most := top
	top = ch.scale(top, formatCount)
	ch.Lines = []chartLine{
		{Class: "l-unknown", Points: steps(v, times, unknown, top)},
		{Class: "l-escalated", Points: steps(v, times, escalated, top)},
	}
	ch.Legend = []chartLegend{{Class: "l-unknown", Label: "Unknown"}, {Class: "l-escalated", Label: "Escalated"}}
	ch.Summary = fmt.Sprintf("now %s Unknown and %s escalated; at most %s in this window", formatCount(last[0]), formatCount(last[1]), formatCount(most))
	return ch
}

// steps is a step line through values at times: each value holds until
// the next time.
func steps(v chartsView, times []time.Time, values []float64, top float64) string {
	points := make([]string, 0, 2*len(times))
	for i, t := range times {
		if i > 0 {
			points = append(points, fmt.Sprintf("%.1f,%.1f", v.x(t), y(values[i-1], top)))
		}
		points = append(points, fmt.Sprintf("%.1f,%.1f", v.x(t), y(values[i], top)))
	}
	return strings.Join(points, " ")
}

// lagChart: the projector's and each relay's lag, from the samples serve
// records each minute (the day's: the worst of each quarter hour). A
// minute without a sample is a gap in its line.
func (c *Console) lagChart(ctx context.Context, v chartsView, now time.Time) chart {
	ch := v.newChart("lag", "Behind the log: projector and relays", "the oldest event not yet passed, sampled each minute")
	samples, err := c.cfg.Reads.LagHistory(ctx, v.From, v.To)
	if err != nil {
		ch.Error = "The lag history cannot be read: " + err.Error()
		return ch
	}
	if len(samples) == 0 {
		ch.Empty = "No lag was recorded in this window (serve records it each minute)."
		ch.Summary = ch.Empty
		return ch
	}
	worst := map[string]map[time.Time]time.Duration{}
	var sources []string
	top := 0.0
	for _, s := range samples {
		if worst[s.Source] == nil {
			worst[s.Source] = map[time.Time]time.Duration{}
			sources = append(sources, s.Source)
		}
		b := s.At.Sub(v.From).Truncate(v.Window.Step)
		at := v.From.Add(b)
		worst[s.Source][at] = max(worst[s.Source][at], s.Behind)
		top = max(top, s.Behind.Seconds())
	}
	most := top
	top = ch.scale(max(top, 1), formatSeconds)
	for i, src := range sources {
		class := "l-series" + strconv.Itoa(min(i, 3))
		var run []string
		flush := func() {
			if len(run) == 1 { // a lone sample: a short flat stroke, so that it shows
				xy := strings.Split(run[0], ",")
				x, _ := strconv.ParseFloat(xy[0], 64)
				run = append(run, fmt.Sprintf("%.1f,%s", x+2, xy[1]))
			}
			if len(run) > 0 {
				ch.Lines = append(ch.Lines, chartLine{Class: class, Points: strings.Join(run, " ")})
			}
			run = nil
		}
		for t := v.From; t.Before(v.To) && !t.After(now); t = t.Add(v.Window.Step) {
			d, ok := worst[src][t]
			if !ok {
				flush()
				continue
			}
			run = append(run, fmt.Sprintf("%.1f,%.1f", v.x(t.Add(v.Window.Step/2)), y(d.Seconds(), top)))
		}
		flush()
		label := src
		if src == projections.LagSourceProjector {
			label = "projector (read models)"
		}
		ch.Legend = append(ch.Legend, chartLegend{Class: class, Label: label})
	}
	ch.Summary = fmt.Sprintf("%d sources; the most behind was %s", len(sources), (time.Duration(most * float64(time.Second))).Round(time.Second))
	return ch
}
