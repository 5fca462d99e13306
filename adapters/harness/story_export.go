package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"opledger/domain"
	"opledger/domain/worker"
)

// ExportOperation is the second story's operation: three downloads of a
// generated export.
const ExportOperation domain.OperationID = "OP-5120"

// ExportSummary is what the second story ends with: figures read from the
// export-delivery service's ledger and from the ledger's own answers.
type ExportSummary struct {
	// ExportUses is how many uses the decision authorized.
	ExportUses int `json:"export_uses"`
	// ExportsDelivered counts the deliveries the service committed for the
	// operation; ExportKeys the keys they were made under (one per use).
	ExportsDelivered int `json:"exports_delivered"`
	ExportKeys       int `json:"export_keys"`
	// ExportReplaysRejected counts presentations of the spent capability
	// refused as replays; ExportUnknownReconciled Unknown uses reconciled.
	ExportReplaysRejected   int    `json:"export_replays_rejected"`
	ExportUnknownReconciled int    `json:"export_unknown_reconciled"`
	ExportFinalState        string `json:"export_final_state"`
}

// RunExportStory plays the second kind briefly, after the refund story, on
// w (Friday 16:00, the clock moved to each step): an agent approves three
// downloads of export EXP-7781; the first is delivered; the second is
// delivered but its worker dies before recording it, a download asked for
// meanwhile is refused (Unknown blocks the next use) until the reconciler
// finds the delivery under the use's key; the third is delivered; a fourth
// presentation is AlreadyConsumed, replay suspected. Each download is a
// presentation of the capability by its holder (a message of its own),
// handed to a worker directly: the relay publishes nothing for an export
// download.
func RunExportStory(ctx context.Context, w *World, out io.Writer) (ExportSummary, error) {
	if w.Sim == nil {
		return ExportSummary{}, errors.New("export story: needs the in-process simulator")
	}
	day := w.Clock.Now().Truncate(24 * time.Hour)
	at := func(h, m, s int) {
		t := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
		if d := t.Sub(w.Clock.Now()); d > 0 {
			w.Clock.Advance(d)
		}
	}
	line := func(what string, args ...any) {
		fmt.Fprintf(out, "%s  %s\n", w.Clock.Now().Format("Mon 15:04:05"), fmt.Sprintf(what, args...))
	}
	const uses = 3
	sum := ExportSummary{ExportUses: uses}
	op := ExportOperation

	at(16, 0, 0)
	r, err := w.ApproveDownloads(ctx, op, "EXP-7781", uses)
	if err != nil {
		return sum, fmt.Errorf("export story: approve: %w", err)
	}
	if r.Capability == "" {
		return sum, fmt.Errorf("export story: the decision was %s %v", r.Decision.Verdict, r.Decision.Reasons)
	}
	line("agent approves %d downloads of export EXP-7781: operation %s, capability %s (%d uses, expires %s)",
		uses, op, r.Capability, uses, w.Clock.Now().Add(domain.DefaultCapabilityTTL).Format("15:04"))

	download := func(wk *worker.Worker, msg domain.MessageID) (worker.Result, error) {
		return wk.Handle(ctx, r.Delivery(msg))
	}
	claimed := func(res worker.Result) string {
		return fmt.Sprintf("Claimed use %d of %d (key %s)", res.Claim.Use, uses, res.Claim.Claimed.IdempotencyKey)
	}
	d, err := w.Worker("worker-d")
	if err != nil {
		return sum, err
	}

	at(16, 0, 5)
	res, err := download(d, "MSG-DL-1")
	if err != nil || res.Claim.Claimed == nil {
		return sum, fmt.Errorf("export story: download 1: %s %w", res.Claim.Status, err)
	}
	line("download MSG-DL-1: %s, delivered %s (%s); %d uses left", claimed(res), res.Reference, res.Outcome, res.Claim.UsesLeft)

	at(16, 0, 20)
	e, err := w.WorkerOn("worker-e", CrashAfterClaim{w.Ledger})
	if err != nil {
		return sum, err
	}
	res, err = download(e, "MSG-DL-2")
	if err != nil || res.Claim.Claimed == nil {
		return sum, fmt.Errorf("export story: download 2: %s %w", res.Claim.Status, err)
	}
	line("download MSG-DL-2: %s, delivered, but worker E is recycled before it records anything", claimed(res))

	at(16, 1, 30)
	if _, err := untilSome(ctx, func() (int, error) { return w.Sweeper.SweepOnce(ctx) }); err != nil {
		return sum, fmt.Errorf("export story: sweep: %w", err)
	}
	res, err = download(d, "MSG-DL-3")
	if err != nil {
		return sum, fmt.Errorf("export story: download 3: %w", err)
	}
	line("the lease lapsed: use 2 is Unknown; download MSG-DL-3 meanwhile: %s (%s), nothing sent, the use not spent",
		res.Claim.Status, res.Claim.Reason)

	at(16, 2, 0)
	if _, err = untilSome(ctx, func() (int, error) {
		steps, err := w.Reconciler.ReconcileOnce(ctx)
		for _, st := range steps {
			if st.Verdict == "completed" || st.Verdict == "not-applied" {
				sum.ExportUnknownReconciled++
			}
			line("the reconciler asks the export-delivery service about %s: %s (%s)", st.Ref.OperationID, st.Verdict, st.Detail)
		}
		return len(steps), err
	}); err != nil {
		return sum, fmt.Errorf("export story: reconcile: %w", err)
	}

	at(16, 2, 10)
	res, err = download(d, "MSG-DL-4")
	if err != nil || res.Claim.Claimed == nil {
		return sum, fmt.Errorf("export story: download 4: %s %w", res.Claim.Status, err)
	}
	line("download MSG-DL-4: %s, delivered %s (%s); %d uses left", claimed(res), res.Reference, res.Outcome, res.Claim.UsesLeft)

	at(16, 5, 0)
	res, err = download(d, "MSG-DL-5")
	if err != nil {
		return sum, fmt.Errorf("export story: download 5: %w", err)
	}
	if res.Claim.Status == domain.StatusAlreadyConsumed {
		sum.ExportReplaysRejected++
	}
	line("download MSG-DL-5: %s (%s), replay suspected %t, execution attempted %t",
		res.Claim.Status, res.Claim.Reason, res.Claim.ReplaySuspected, res.Executed)

	l := w.Sim.Ledger()
	sum.ExportsDelivered = l.ByOperation[string(op)].ExportsDelivered
	st, err := w.State(ctx, op)
	if err != nil {
		return sum, err
	}
	for _, x := range st.Executions {
		if l.DeliveriesByKey[string(x.IdempotencyKey)] > 0 {
			sum.ExportKeys++
		}
	}
	sum.ExportFinalState = string(st.Status())
	line("the export-delivery service's ledger: %d deliveries for %s, under %d keys, one per use", sum.ExportsDelivered, op, sum.ExportKeys)
	return sum, nil
}
