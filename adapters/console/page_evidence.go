package console

import (
	"net/http"
	"net/url"
	"strconv"

	"opledger/domain"
	"opledger/projections"
)

// evidenceTab is one view of the evidence: the security signals people
// look for first, then everything.
type evidenceTab struct {
	Value, Label, Help string
	query              projections.EvidenceQuery
}

var evidenceTabs = []evidenceTab{
	{Value: "", Label: "All", Help: "Every refused presentation, duplicate delivery and refused write"},
	{Value: "replay", Label: "Replays suspected", Help: "Spent authority presented under a new message id: a resubmission tool, or a replay",
		query: projections.EvidenceQuery{ReplayOnly: true}},
	{Value: "forged", Label: "Forged or invalid tokens", Help: "Capability tokens whose signature, form or claims do not hold",
		query: projections.EvidenceQuery{Reason: string(domain.ReasonCapabilityInvalid)}},
	{Value: "refused-writes", Label: "Refused writes", Help: "An executor's write without the lease: a stale epoch, or no or a wrong lease secret",
		query: projections.EvidenceQuery{Kind: projections.EvidenceWriteRefused}},
	{Value: "refused", Label: "Refused presentations", Help: "Capabilities refused before any operation logic ran: spent, expired, revoked, …",
		query: projections.EvidenceQuery{Kind: projections.EvidencePresentationRejected}},
	{Value: "duplicates", Label: "Duplicate deliveries", Help: "A message seen before: recorded, nothing executed",
		query: projections.EvidenceQuery{Kind: projections.EvidenceDeliveryDuplicated}},
}

type evidenceView struct {
	Tabs     []evidenceTab
	Tab      evidenceTab
	Evidence []projections.Evidence
	Next     string
	First    string
}

// evidence: GET /ui/evidence?kind=&after=, the evidence and security
// signals, newest first, keyset paged.
func (c *Console) evidence(w http.ResponseWriter, r *http.Request, v *visit) error {
	q := r.URL.Query()
	vw := evidenceView{Tabs: evidenceTabs}
	found := false
	for _, t := range evidenceTabs {
		if t.Value == q.Get("kind") {
			vw.Tab, found = t, true
		}
	}
	if !found {
		return badRequest("kind %q is not one of the evidence views", q.Get("kind"))
	}
	query := vw.Tab.query
	query.NewestFirst, query.Limit = true, pageSize
	if text := q.Get("after"); text != "" {
		after, err := strconv.ParseInt(text, 10, 64)
		if err != nil || after < 1 {
			return badRequest("after must be the cursor of a page this console linked to")
		}
		query.After = after
	}
	page, err := c.cfg.Reads.ListEvidence(r.Context(), query)
	if err != nil {
		return err
	}
	vw.Evidence = page.Evidence
	base := url.Values{}
	if vw.Tab.Value != "" {
		base.Set("kind", vw.Tab.Value)
	}
	if page.Next != 0 {
		next := url.Values{"after": {strconv.FormatInt(page.Next, 10)}}
		if vw.Tab.Value != "" {
			next.Set("kind", vw.Tab.Value)
		}
		vw.Next = "/ui/evidence?" + next.Encode()
	}
	if query.After != 0 {
		vw.First = "/ui/evidence?" + base.Encode()
	}
	c.render(w, r, v, http.StatusOK, "evidence", "Evidence and security signals", "evidence", vw)
	return nil
}
