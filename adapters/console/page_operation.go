package console

import (
	"errors"
	"net/http"

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
	Rows         []audit.TimelineRow
	// StepsCut and RowsCut, when not 0, are how many steps and events there
	// are in all, of which the page shows the first maxStepsDrawn and
	// maxEventsListed.
	StepsCut, RowsCut int
	Capabilities      []capabilityView
	Executions        []executionView
	Evidence          []projections.Evidence
	EvidenceMore      bool
	Deliveries        []projections.Delivery
	Reconciliations   []projections.Reconciliation
	Skipped           []projections.SkippedEvent
	// References are the provider's references for this operation's
	// refunds, with where each was learnt.
	References []providerReference
}

type providerReference struct {
	Reference, Execution, Source string
}

// Bounds of an operation's page: a stream flooded with duplicate
// deliveries (each an event) must not make a page without end. The JSON
// history has every event.
const (
	maxEvidenceShown = 100
	maxStepsDrawn    = 400  // arrows of the diagram
	maxEventsListed  = 1000 // rows of the events table
)

// operation: GET /ui/operations/{id}: the timeline as a sequence diagram,
// the events, capabilities, executions, evidence and provider references.
// The timeline and events come from the stream itself; the rest from the
// read models (which may trail it).
func (c *Console) operation(w http.ResponseWriter, r *http.Request, v *visit) error {
	id, err := domain.ParseOperationID(r.PathValue("id"))
	if err != nil {
		return badRequest("operation id: %v", err)
	}
	ctx := r.Context()
	vw := operationView{ID: string(id)}
	rows, err := audit.Replay(ctx, c.cfg.Ledger.Store(), id)
	if errors.Is(err, audit.ErrNoSuchOperation) {
		return notFound("No operation %s in the event store.", id)
	}
	if err != nil {
		return err
	}
	vw.Rows = rows
	if len(rows) > maxEventsListed {
		vw.Rows, vw.RowsCut = rows[:maxEventsListed], len(rows)
	}
	seq := audit.SequenceOf(rows)
	if len(seq.Steps) > maxStepsDrawn {
		vw.StepsCut = len(seq.Steps)
		seq.Steps = seq.Steps[:maxStepsDrawn]
	}
	vw.Timeline = drawTimeline(seq)
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
	evs, err := c.cfg.Reads.ListEvidence(ctx, projections.EvidenceQuery{OperationID: vw.ID, Limit: maxEvidenceShown})
	if err != nil {
		return err
	}
	vw.Evidence, vw.EvidenceMore = evs.Evidence, evs.Next != 0
	if vw.Deliveries, err = c.cfg.Reads.DeliveriesOf(ctx, vw.ID); err != nil {
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
	rows, err := audit.Replay(r.Context(), c.cfg.Ledger.Store(), id)
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
