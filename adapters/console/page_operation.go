package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/projections"
)

// capabilityView is a capability with its state at the ledger's now.
type capabilityView struct {
	projections.Capability
	StateNow  string
	Revocable bool
}

// executionView is an execution with what may be done to it.
type executionView struct {
	projections.Execution
	Resolvable bool
}

type operationView struct {
	ID           string
	InReadModels bool
	Op           projections.Operation
	Timeline     timelineSVG
	// Events is how many events the stream holds; Entries are its
	// state-changing events and its runs of evidence, counted, as the
	// events table lists them.
	Events  int64
	Entries []entryView
	// StepsCut and EntriesCut, when not 0, are how many steps and entries
	// there are in all, of which the page shows the first and the last
	// halves of maxStepsDrawn and maxEntriesListed.
	StepsCut, EntriesCut int
	Capabilities         []capabilityView
	Executions           []executionView
	Evidence             []projections.Evidence
	EvidenceMore         bool
	Deliveries           []projections.Delivery
	DeliveriesTotal      int64 // of which Deliveries are the first maxDeliveriesShown
	DuplicatesSummarized int64 // duplicate deliveries counted in summaries, not per message
	Reconciliations      []projections.Reconciliation
	Skipped              []projections.SkippedEvent
	// References are the provider's references for this operation's
	// refunds, with where each was learnt.
	References []providerReference
}

// entryView is one entry of the events table: an event, a counted run of
// evidence, or the entries a long table leaves out.
type entryView struct {
	Row   *audit.TimelineRow
	Group *groupView
	Gap   *gapView
}

// groupView is a run of evidence events, collapsed: what it counts, and a
// link that expands it (the page again, listing one page of its events).
type groupView struct {
	Stream           string // the stream its events are in
	From, To         int64
	First, Last      time.Time
	Events, Refusals int64
	Summary, Details string
	ReplaySuspected  int64
	Anchor           string // its element id
	ExpandHref       string
	// Expanded: Rows are the run's events from version Shown[0] to
	// Shown[1]; NextHref, PrevHref page through it; CollapseHref folds it.
	Expanded                         bool
	Rows                             []audit.TimelineRow
	ShownFrom, ShownTo               int64
	NextHref, PrevHref, CollapseHref string
}

// gapView stands for entries a long table does not list.
type gapView struct {
	Entries  int
	From, To int64 // the versions they span
}

type providerReference struct {
	Reference, Execution, Source string
}

// Bounds of an operation's page: whatever its stream holds, the page lists
// at most maxEntriesListed entries (state-changing events and counted runs
// of evidence; the first and the last half when there are more) and draws
// at most maxStepsDrawn steps, and an expanded run lists expandPage events
// at a time. The JSON history has every event.
const (
	maxEvidenceShown   = 20   // the latest
	maxDeliveriesShown = 20   // the messages that claimed first
	maxStepsDrawn      = 400  // arrows of the diagram
	maxEntriesListed   = 1000 // entries of the events table
	expandPage         = 200  // events of an expanded run per page
)

// operation: GET /ui/operations/{id}[?group=V[&at=W]]: the timeline as a
// sequence diagram, the events (each run of evidence collapsed into a
// counted group; ?group=V expands the run starting at version V, listing
// expandPage of its events from version W), capabilities, executions,
// evidence and provider references. The timeline and events come from the
// stream itself, read incrementally (timelines); the rest from the read
// models (which may trail it).
func (c *Console) operation(w http.ResponseWriter, r *http.Request, v *visit) error {
	id, err := domain.ParseOperationID(r.PathValue("id"))
	if err != nil {
		return badRequest("operation id: %v", err)
	}
	expand, at, err := expandParams(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	vw := operationView{ID: string(id)}
	var open *groupView
	err = c.timelines.with(ctx, id, func(t *audit.Timeline) error {
		vw.Events = t.Events
		vw.Entries, vw.EntriesCut, open = entriesOf(t, string(id), expand)
		seq := audit.SequenceOfTimeline(t)
		if len(seq.Steps) > maxStepsDrawn {
			vw.StepsCut = len(seq.Steps)
			seq.Steps = cutSteps(seq, maxStepsDrawn)
		}
		vw.Timeline = drawTimeline(seq)
		return nil
	})
	if errors.Is(err, audit.ErrNoSuchOperation) {
		return notFound("No operation %s in the event store.", id)
	}
	if err != nil {
		return err
	}
	if open != nil {
		if err := c.expandGroup(ctx, id, open, at); err != nil {
			return err
		}
	}
	op, found, err := c.cfg.Reads.Operation(ctx, string(id))
	if err != nil {
		return err
	}
	vw.Op, vw.InReadModels = op, found
	if found {
		if err := c.operationDetails(r, &vw); err != nil {
			return err
		}
	}
	c.render(w, r, v, http.StatusOK, "operation", string(id), "operations", vw)
	return nil
}

// expandParams reads ?group=V&at=W: the run to expand (-1: none) and the
// version to list it from (-1: its start).
func expandParams(r *http.Request) (group, at int64, err error) {
	group, at = -1, -1
	q := r.URL.Query()
	if s := q.Get("group"); s != "" {
		if group, err = strconv.ParseInt(s, 10, 64); err != nil || group < 0 {
			return 0, 0, badRequest("group: want a stream version (a whole number from 0), not %q", clip(s, 40))
		}
	}
	if s := q.Get("at"); s != "" {
		if at, err = strconv.ParseInt(s, 10, 64); err != nil || at < 0 {
			return 0, 0, badRequest("at: want a stream version (a whole number from 0), not %q", clip(s, 40))
		}
	}
	return group, at, nil
}

// entriesOf lists t's entries as the events table shows them, the group
// starting at version expand marked expanded (and returned).
func entriesOf(t *audit.Timeline, op string, expand int64) ([]entryView, int, *groupView) {
	var open *groupView
	view := func(e audit.TimelineEntry) []entryView {
		if e.Row != nil {
			return []entryView{{Row: e.Row}}
		}
		g := e.Group
		if g.Whole() {
			out := make([]entryView, 0, len(g.Samples))
			for i := range g.Samples {
				out = append(out, entryView{Row: &g.Samples[i]})
			}
			return out
		}
		gv := &groupView{Stream: cmp.Or(g.Stream, domain.OperationID(op).StreamName()), From: g.From, To: g.To, First: g.First, Last: g.Last, Events: g.Events, Refusals: g.Refusals, Summary: g.Summary(), Details: g.Details(),
			ReplaySuspected: g.ReplaySuspected, Anchor: fmt.Sprintf("group-%d", g.From)}
		gv.ExpandHref = groupHref(op, g.From, -1)
		if g.From == expand {
			gv.Expanded, open = true, gv
		}
		return []entryView{{Group: gv}}
	}
	var all []entryView
	for _, e := range t.Entries {
		all = append(all, view(e)...)
	}
	if len(all) <= maxEntriesListed {
		return all, 0, open
	}
	head, tail := all[:maxEntriesListed/2], all[len(all)-maxEntriesListed/2:]
	gap := &gapView{Entries: len(all) - len(head) - len(tail), From: entryVersion(all[len(head)], false), To: entryVersion(all[len(all)-len(tail)-1], true)}
	out := append(append(append([]entryView{}, head...), entryView{Gap: gap}), tail...)
	if open != nil && !slices.ContainsFunc(out, func(e entryView) bool { return e.Group == open }) {
		open = nil // the run asked for is among the entries left out
	}
	return out, len(all), open
}

// entryVersion is an entry's first (or last) stream version.
func entryVersion(e entryView, last bool) int64 {
	if e.Row != nil {
		return e.Row.Version
	}
	if last {
		return e.Group.To
	}
	return e.Group.From
}

func groupHref(op string, group, at int64) string {
	u := "/ui/operations/" + url.PathEscape(op) + "?group=" + strconv.FormatInt(group, 10)
	if at >= 0 {
		u += "&at=" + strconv.FormatInt(at, 10)
	}
	return u + "#group-" + strconv.FormatInt(group, 10)
}

// expandGroup reads one page of g's events, from version at (its start
// when at is outside it): expandPage events at most, one read.
func (c *Console) expandGroup(ctx context.Context, id domain.OperationID, g *groupView, at int64) error {
	if at < g.From || at > g.To {
		at = g.From
	}
	n := int(min(int64(expandPage), g.To-at+1))
	recs, err := c.events.ReadStream(ctx, g.Stream, at, n)
	if err != nil {
		return fmt.Errorf("read %s: %w", g.Stream, err)
	}
	for _, rec := range recs {
		row, err := audit.RowOf(rec)
		if err != nil {
			return err
		}
		g.Rows = append(g.Rows, row)
	}
	g.ShownFrom, g.ShownTo = at, at+int64(len(recs))-1
	if g.ShownTo < g.To && len(recs) == n {
		g.NextHref = groupHref(string(id), g.From, g.ShownTo+1)
	}
	if at > g.From {
		g.PrevHref = groupHref(string(id), g.From, max(g.From, at-expandPage))
	}
	g.CollapseHref = "/ui/operations/" + url.PathEscape(string(id)) + "#" + g.Anchor
	return nil
}

// cutSteps keeps the first and the last half of n steps of seq, with a
// note between them saying how many are not drawn.
func cutSteps(seq audit.Sequence, n int) []audit.Step {
	head, tail := seq.Steps[:n/2], seq.Steps[len(seq.Steps)-n/2:]
	left := len(seq.Steps) - len(head) - len(tail)
	first, last := seq.Steps[len(head)], seq.Steps[len(seq.Steps)-len(tail)-1]
	lane := "ledger"
	if _, ok := seq.Lane(lane); !ok && len(seq.Lanes) > 0 {
		lane = seq.Lanes[0].ID
	}
	gap := audit.Step{Version: first.Version, Time: first.Time, Event: "gap", From: lane, To: lane, Style: audit.StepInferred,
		Label: fmt.Sprintf("… %s steps not drawn (#%s–#%s): the events table lists them", audit.Thousands(int64(left)),
			audit.Thousands(first.Version), audit.Thousands(last.Version))}
	return append(append(append([]audit.Step{}, head...), gap), tail...)
}

func (c *Console) operationDetails(r *http.Request, vw *operationView) error {
	ctx, now := r.Context(), c.ledgerNow()
	caps, err := c.cfg.Reads.CapabilitiesOf(ctx, vw.ID)
	if err != nil {
		return err
	}
	for _, cp := range caps {
		st := cp.StateAt(now)
		vw.Capabilities = append(vw.Capabilities, capabilityView{Capability: cp, StateNow: st, Revocable: st == string(domain.CapIssued)})
	}
	xs, err := c.cfg.Reads.ExecutionsOf(ctx, vw.ID)
	if err != nil {
		return err
	}
	for _, x := range xs {
		vw.Executions = append(vw.Executions, executionView{Execution: x,
			Resolvable: x.State == string(domain.ExecUnknown) || x.State == string(domain.ExecEscalated)})
		if x.ProviderReference != nil && *x.ProviderReference != "" {
			vw.References = append(vw.References, providerReference{Reference: *x.ProviderReference, Execution: x.ID, Source: sourceOf(x.OutcomeSource)})
		}
	}
	evs, err := c.cfg.Reads.ListEvidence(ctx, projections.EvidenceQuery{OperationID: vw.ID, Limit: maxEvidenceShown, NewestFirst: true})
	if err != nil {
		return err
	}
	vw.Evidence, vw.EvidenceMore = evs.Evidence, evs.Next != 0
	if vw.Deliveries, vw.DeliveriesTotal, err = c.cfg.Reads.DeliveriesShown(ctx, vw.ID, maxDeliveriesShown); err != nil {
		return err
	}
	if vw.DuplicatesSummarized, err = c.cfg.Reads.DuplicatesSummarized(ctx, vw.ID); err != nil {
		return err
	}
	if vw.Reconciliations, err = c.cfg.Reads.ReconciliationsOf(ctx, vw.ID); err != nil {
		return err
	}
	if vw.Op.ProjectionIncomplete {
		if vw.Skipped, err = c.cfg.Reads.SkippedOf(ctx, vw.ID); err != nil {
			return err
		}
	}
	return nil
}

func sourceOf(s *string) string {
	if s == nil {
		return "recorded"
	}
	switch *s {
	case "executor":
		return "the worker's outcome"
	case "late-outcome":
		return "the stale worker's late evidence"
	case "reconciliation":
		return "reconciliation"
	}
	return *s
}

// historyJSON: GET /ui/operations/{id}/history.json, the operation's
// history from its stream as `opledger audit replay --format json` prints
// it (GET /v1/operations/{id}/events is the same stream for bearer
// tokens).
func (c *Console) historyJSON(w http.ResponseWriter, r *http.Request, _ *visit) error {
	id, err := domain.ParseOperationID(r.PathValue("id"))
	if err != nil {
		return badRequest("operation id: %v", err)
	}
	rows, err := audit.Replay(r.Context(), c.events, id)
	if errors.Is(err, audit.ErrNoSuchOperation) {
		return notFound("No operation %s in the event store.", id)
	}
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `inline; filename="`+string(id)+`.json"`)
	return audit.WriteTimelineJSON(w, id, rows)
}
