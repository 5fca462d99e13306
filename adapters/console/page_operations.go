package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"opledger/domain"
	"opledger/projections"
)

// operationStates are the states the filter offers, in the order an
// operation passes them.
var operationStates = []string{"Requested", "Denied", "Authorized", "Executing", "Unknown", "Escalated", "Completed", "NotApplied"}

// ageFilter is one choice of the age filter.
type ageFilter struct {
	Value, Label string
	// newer: created within d of now; else created more than d ago.
	newer bool
	d     time.Duration
}

var ageFilters = []ageFilter{
	{Value: "", Label: "any age"},
	{Value: "1h", Label: "last hour", newer: true, d: time.Hour},
	{Value: "24h", Label: "last 24 hours", newer: true, d: 24 * time.Hour},
	{Value: "gt1h", Label: "older than an hour", d: time.Hour},
	{Value: "gt24h", Label: "older than a day", d: 24 * time.Hour},
	{Value: "gt7d", Label: "older than a week", d: 7 * 24 * time.Hour},
}

type operationsView struct {
	States     []string
	Ages       []ageFilter
	State      string
	Age        string
	Replay     bool
	Search     string
	Operations []projections.Operation
	Attention  projections.Attention
	// Next is the query of the next (older) page, First that of the first;
	// empty when there is none.
	Next, First string
	Filtered    bool
	// Charts are the pictures of the last hour or day (charts.go).
	Charts chartsView
}

// operations: GET /ui/operations?state=&age=&replay=1&q=&after=, newest
// first, keyset paged.
func (c *Console) operations(w http.ResponseWriter, r *http.Request, v *visit) error {
	q := r.URL.Query()
	vw := operationsView{States: operationStates, Ages: ageFilters, State: q.Get("state"), Age: q.Get("age"),
		Replay: q.Get("replay") == "1", Search: strings.TrimSpace(q.Get("q"))}
	query := projections.OperationQuery{ReplaySuspected: vw.Replay, Limit: pageSize}
	if vw.State != "" {
		if !known(operationStates, vw.State) {
			return badRequest("state must be one of %s", strings.Join(operationStates, ", "))
		}
		query.States = []string{vw.State}
	}
	now := c.ledgerNow()
	found := false
	for _, a := range ageFilters {
		if a.Value != vw.Age {
			continue
		}
		found = true
		switch {
		case a.d == 0:
		case a.newer:
			query.CreatedAfter = now.Add(-a.d)
		default:
			query.CreatedBefore = now.Add(-a.d)
		}
	}
	if !found {
		return badRequest("age %q is not one of the filter's choices", vw.Age)
	}
	if vw.Search != "" {
		if len(vw.Search) > projections.MaxSearchLength || domain.CheckText("q", vw.Search, projections.MaxSearchLength, false) != nil {
			return badRequest("search for one id of at most %d printable characters", projections.MaxSearchLength)
		}
		query.Search = vw.Search
	}
	if text := q.Get("after"); text != "" {
		after, ok := projections.ParseTimeCursor(text, func(id string) bool { return len(id) <= domain.MaxIDLength })
		if !ok {
			return badRequest("after must be the cursor of a page this console linked to")
		}
		query.After = &after
	}
	page, err := c.cfg.Reads.ListOperations(r.Context(), query)
	if err != nil {
		return err
	}
	if vw.Attention, err = c.cfg.Reads.Attention(r.Context()); err != nil {
		return err
	}
	vw.Operations = page.Operations
	vw.Filtered = vw.State != "" || vw.Age != "" || vw.Replay || vw.Search != ""
	base := url.Values{}
	for k, val := range map[string]string{"state": vw.State, "age": vw.Age, "q": vw.Search} {
		if val != "" {
			base.Set(k, val)
		}
	}
	if vw.Replay {
		base.Set("replay", "1")
	}
	if page.Next != nil {
		next := url.Values{}
		for k, vals := range base {
			next[k] = vals
		}
		next.Set("after", page.Next.String())
		vw.Next = "/ui/operations?" + next.Encode()
	}
	if query.After != nil {
		vw.First = "/ui/operations?" + base.Encode()
	}
	if vw.Charts, err = c.chartsFor(r.Context(), r, false); err != nil {
		return err
	}
	c.render(w, r, v, http.StatusOK, "operations", "Operations", "operations", vw)
	return nil
}

func known(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
