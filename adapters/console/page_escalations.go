package console

import (
	"net/http"
	"net/url"

	"opledger/domain"
	"opledger/projections"
)

// maxEvidencePerEscalation bounds the evidence shown with each escalation.
const maxEvidencePerEscalation = 10

type escalationView struct {
	projections.Escalation
	Evidence []projections.Evidence
}

type escalationsView struct {
	Escalations []escalationView
	Next, First string
}

// escalations: GET /ui/escalations?after=, the queue of executions the
// reconciler could not settle, oldest first, each with the resolve form
// for operators.
func (c *Console) escalations(w http.ResponseWriter, r *http.Request, v *visit) error {
	var after *projections.TimeCursor
	if text := r.URL.Query().Get("after"); text != "" {
		cur, ok := projections.ParseTimeCursor(text, func(id string) bool { _, err := domain.ParseExecutionID(id); return err == nil })
		if !ok {
			return badRequest("after must be the cursor of a page this console linked to")
		}
		after = &cur
	}
	page, err := c.cfg.Reads.ListEscalations(r.Context(), after, pageSize)
	if err != nil {
		return err
	}
	vw := escalationsView{}
	ops := make([]string, 0, len(page.Escalations))
	execs := make([]string, 0, len(page.Escalations))
	at := map[string]int{}
	for i, e := range page.Escalations {
		vw.Escalations = append(vw.Escalations, escalationView{Escalation: e})
		ops, execs, at[e.ID] = append(ops, e.OperationID), append(execs, e.ID), i
	}
	evs, err := c.cfg.Reads.EvidenceOfExecutions(r.Context(), ops, execs, maxEvidencePerEscalation)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.ExecutionID == nil {
			continue
		}
		if i, ok := at[*ev.ExecutionID]; ok {
			vw.Escalations[i].Evidence = append(vw.Escalations[i].Evidence, ev)
		}
	}
	if page.Next != nil {
		vw.Next = "/ui/escalations?" + url.Values{"after": {page.Next.String()}}.Encode()
	}
	if after != nil {
		vw.First = "/ui/escalations"
	}
	c.render(w, r, v, http.StatusOK, "escalations", "Escalations", "escalations", vw)
	return nil
}
