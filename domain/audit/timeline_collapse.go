package audit

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"opledger/domain"
)

// A collapsed timeline: every state-changing event as its own entry, and
// each run of evidence (domain.IsEvidence: refused presentations,
// duplicate deliveries, refused writes) as one counted group. A flood of
// refusals then costs the reader one entry per run, not one per refusal,
// and can never push a genuine outcome out of sight. Timeline is folded one
// row at a time, so a reader that remembers it adds only what a stream
// gained since.

// Bounds of one group, whatever the run's length.
const (
	// GroupSamples is how many rows a group keeps (its first): a run this
	// short is shown whole.
	GroupSamples = 3
	// maxGroupActors bounds the distinct actors a group names.
	maxGroupActors = 8
	// maxGroupReasons bounds the reasons a group tallies one by one; the
	// rest are tallied under otherReasons. Reasons are the ledger's own
	// codes (a few dozen), so the bound is only reached by a bug.
	maxGroupReasons = 16
	otherReasons    = "other"
)

// Tally is a count under a name.
type Tally struct {
	Name  string
	Count int64
}

// EvidenceGroup is a run of consecutive evidence events of one stream.
type EvidenceGroup struct {
	// Stream is the operation's evidence stream when the run is there
	// (TimelineRow.Stream); "" when it is in the operation's stream (as
	// earlier builds recorded evidence).
	Stream      string
	From, To    int64     // the stream versions of its first and last event
	First, Last time.Time // their times
	Events      int64     // events in the run
	// Refusals is what the run accounts for: one per event, and a summary
	// event's own count (TimelineRow.Count).
	Refusals        int64
	Types           []Tally // by event type, first seen first
	Reasons         []Tally // by reason code, first seen first
	Actors          []string
	MoreActors      bool  // more distinct actors than Actors names
	ReplaySuspected int64 // refusals with replay suspected
	Samples         []TimelineRow
}

// Whole reports whether Samples holds every event of the run.
func (g *EvidenceGroup) Whole() bool { return g.Events <= int64(len(g.Samples)) }

func (g *EvidenceGroup) add(r TimelineRow) {
	if g.Events == 0 {
		g.Stream, g.From, g.First = r.Stream, r.Version, r.Time
	}
	g.To, g.Last = r.Version, r.Time
	g.Events++
	n := max(r.Count, 1)
	g.Refusals += n
	g.Types = tally(g.Types, r.Event, n, maxGroupReasons)
	if r.Reason != "" {
		g.Reasons = tally(g.Reasons, r.Reason, n, maxGroupReasons)
	}
	if r.Actor != "" && !contains(g.Actors, r.Actor) {
		if len(g.Actors) < maxGroupActors {
			g.Actors = append(g.Actors, r.Actor)
		} else {
			g.MoreActors = true
		}
	}
	if strings.Contains(r.Detail, "replay suspected") {
		g.ReplaySuspected += n
	}
	if len(g.Samples) < GroupSamples {
		g.Samples = append(g.Samples, r)
	}
}

// tally adds n under name, naming at most limit-1 names one by one and
// counting the rest under otherReasons.
func tally(ts []Tally, name string, n int64, limit int) []Tally {
	for i := range ts {
		if ts[i].Name == name {
			ts[i].Count += n
			return ts
		}
	}
	switch {
	case len(ts) < limit-1:
		return append(ts, Tally{Name: name, Count: n})
	case len(ts) == limit-1:
		return append(ts, Tally{Name: otherReasons, Count: n})
	}
	ts[len(ts)-1].Count += n
	return ts
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Summary says what the group holds in one line: "5,000 refusals (#12–#5,011,
// PresentationRejected ×4,000, WriteRefused ×1,000)".
func (g *EvidenceGroup) Summary() string {
	var types []string
	for _, t := range g.Types {
		types = append(types, t.Name+" ×"+Thousands(t.Count))
	}
	noun := "refusals"
	if g.Refusals == 1 {
		noun = "refusal"
	}
	mark := "#"
	if g.Stream != "" {
		mark = "#e"
	}
	return fmt.Sprintf("%s %s (%s%s–%s%s: %s)", Thousands(g.Refusals), noun, mark, Thousands(g.From), mark, Thousands(g.To), strings.Join(types, ", "))
}

// TimelineEntry is one entry of a Timeline: a state-changing event's row,
// or a group of evidence.
type TimelineEntry struct {
	Row   *TimelineRow
	Group *EvidenceGroup
}

// Timeline is an operation's collapsed timeline. The zero value is empty;
// Add rows in the order of the log (Replay's order). Not safe for
// concurrent use.
type Timeline struct {
	Entries []TimelineEntry
	// Events is how many rows were added; Next the version due next in the
	// operation's stream, EvidenceNext in its evidence stream.
	Events       int64
	Next         int64
	EvidenceNext int64
}

// Add folds the next row in: of the operation's stream, or of its evidence
// stream (r.Stream set). It fails on a row out of its stream's order (a
// gap, or a version seen before): the timeline would not be the history's.
func (t *Timeline) Add(r TimelineRow) error {
	next := &t.Next
	if r.Stream != "" {
		next = &t.EvidenceNext
	}
	if r.Version != *next {
		return fmt.Errorf("timeline: version %d of %s where %d was due", r.Version, cmp.Or(r.Stream, "the operation's stream"), *next)
	}
	t.Events++
	*next++
	if !domain.IsEvidenceType(r.Event) {
		t.Entries = append(t.Entries, TimelineEntry{Row: &r})
		return nil
	}
	n := len(t.Entries)
	if n == 0 || t.Entries[n-1].Group == nil || t.Entries[n-1].Group.Stream != r.Stream {
		t.Entries = append(t.Entries, TimelineEntry{Group: &EvidenceGroup{}})
		n++
	}
	t.Entries[n-1].Group.add(r)
	return nil
}

// CollapseTimeline folds rows (from Replay) into a Timeline.
func CollapseTimeline(rows []TimelineRow) (*Timeline, error) {
	t := &Timeline{}
	for _, r := range rows {
		if err := t.Add(r); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// SequenceOfTimeline is SequenceOf over a collapsed timeline: each
// state-changing event's steps, a short run of evidence event by event,
// and each longer run as one refused step on the ledger's lane that
// counts it. Step.Row indexes t.Entries.
func SequenceOfTimeline(t *Timeline) Sequence {
	b := &sequenceBuilder{used: map[string]bool{}}
	for i, e := range t.Entries {
		switch {
		case e.Row != nil:
			b.row(i, *e.Row)
		case e.Group.Whole():
			for _, r := range e.Group.Samples {
				b.row(i, r)
			}
		default:
			g := e.Group
			label := g.Summary()
			note := g.Details()
			b.add(i, TimelineRow{Version: g.From, Time: g.First, Event: "evidence"}, laneLedger, laneLedger, StepRefused, ToneAlert, label, note)
		}
	}
	return Sequence{Lanes: b.lanes(), Steps: b.steps}
}

// Details says who and why: the reasons, the actors, replay suspected, and
// the first and last time.
func (g *EvidenceGroup) Details() string {
	var parts []string
	if len(g.Reasons) > 0 {
		var rs []string
		for _, r := range g.Reasons {
			rs = append(rs, r.Name+" ×"+Thousands(r.Count))
		}
		parts = append(parts, "reasons "+strings.Join(rs, ", "))
	}
	if len(g.Actors) > 0 {
		by := "by " + strings.Join(g.Actors, ", ")
		if g.MoreActors {
			by += " and others"
		}
		parts = append(parts, by)
	}
	if g.ReplaySuspected > 0 {
		parts = append(parts, Thousands(g.ReplaySuspected)+" with replay suspected")
	}
	parts = append(parts, "from "+stamp(g.First)+" to "+stamp(g.Last))
	return strings.Join(parts, "; ")
}

// Thousands writes n with a comma every three digits: 10,000.
func Thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
