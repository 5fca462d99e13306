package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// StoryOperation is the seed story's operation.
const StoryOperation domain.OperationID = "OP-4471"

// Summary is what the story ends with: figures read from the simulator's
// ledger and from the ledger's own answers.
type Summary struct {
	RefundsCreated     int    `json:"refunds_created"`
	ProviderRequests   int    `json:"provider_requests"`
	ReplaysRejected    int    `json:"replays_rejected"`
	DuplicatesRecorded int    `json:"duplicates_recorded"`
	UnknownReconciled  int    `json:"unknown_reconciled"`
	FinalState         string `json:"final_state"`
}

// RunStory plays the seed's Thursday and Friday on w, writing one line per
// step to out as it happens, and returns the summary. Messages travel by
// courier (nil: DirectCourier). w must have an in-process simulator and a
// fresh store; the clock is moved to each step.
func RunStory(ctx context.Context, w *World, out io.Writer, courier Courier) (Summary, error) {
	if w.Sim == nil {
		return Summary{}, errors.New("story: needs the in-process simulator")
	}
	if courier == nil {
		courier = DirectCourier{}
	}
	day := w.Clock.Now().Truncate(24 * time.Hour)
	at := func(d time.Duration) { w.Clock.Advance(day.Add(d).Sub(w.Clock.Now())) }
	line := func(what string, args ...any) {
		fmt.Fprintf(out, "%s  %s\n", w.Clock.Now().Format("Mon 15:04:05"), fmt.Sprintf(what, args...))
	}
	hms := func(h, m, s int) time.Duration {
		return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second
	}
	var sum Summary
	op := StoryOperation

	at(hms(14, 2, 10))
	r, err := w.Approve(ctx, op, "ORD-8841", 12000)
	if err != nil {
		return sum, fmt.Errorf("story: approve: %w", err)
	}
	line("agent approves 120.00 EUR on ORD-8841: operation %s, decision Allowed, capability %s (single use, expires %s)",
		op, r.Capability, w.Clock.Now().Add(domain.DefaultCapabilityTTL).Format("15:04"))

	at(hms(14, 2, 13))
	if err := w.Sim.Arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: string(op)}); err != nil {
		return sum, err
	}
	a, err := worker.New(worker.Config{ID: "worker-a", Ledger: CrashAfterClaim{w.Ledger}, Provider: w.Provider,
		Clock: w.Clock, Logger: w.Logger, After: w.WorkerTimers.After})
	if err != nil {
		return sum, err
	}
	resA, err := courier.Carry(ctx, a, r, StepFirst, false)
	if err != nil {
		return sum, fmt.Errorf("story: worker A: %w", err)
	}
	if resA.Claim.Claimed == nil {
		return sum, fmt.Errorf("story: worker A's claim was %s (%s)", resA.Claim.Status, resA.Claim.Reason)
	}
	line("worker A receives %s: %s execution %s (lease epoch 1), sends the refund to %s with key %s",
		resA.Claim.Claimed.MessageID, resA.Claim.Status, resA.Claim.ExecutionID, w.Profile.Name, resA.Claim.Claimed.IdempotencyKey)
	line("the provider created the refund; the response is lost (%s) and worker A's process is recycled before it records anything", resA.Outcome)

	at(hms(14, 2, 44))
	b, err := w.Worker("worker-b")
	if err != nil {
		return sum, err
	}
	resB, err := courier.Carry(ctx, b, r, StepRedelivery, true)
	if err != nil {
		return sum, fmt.Errorf("story: worker B: %w", err)
	}
	if resB.Claim.Status == domain.StatusDuplicateDelivery {
		sum.DuplicatesRecorded++
	}
	line("the queue redelivers %s to worker B: %s (%s), execution still %s; recorded, nothing executed",
		resA.Claim.Claimed.MessageID, resB.Claim.Status, resB.Claim.Reason, resB.Claim.ExecutionState)

	at(hms(14, 3, 40))
	lapsed, err := untilSome(ctx, func() (int, error) { return w.Sweeper.SweepOnce(ctx) })
	if err != nil {
		return sum, fmt.Errorf("story: sweep: %w", err)
	}
	line("the lease lapsed: the recovery sweeper marks %d execution(s) Unknown (epoch 1 -> 2)", lapsed)

	at(hms(14, 5, 0))
	var steps int
	_, err = untilSome(ctx, func() (int, error) {
		s, err := w.Reconciler.ReconcileOnce(ctx)
		for _, st := range s {
			if st.Verdict == "completed" || st.Verdict == "not-applied" {
				sum.UnknownReconciled++
			}
			line("the reconciler asks the provider about %s: %s (%s)", st.Ref.OperationID, st.Verdict, st.Detail)
		}
		steps += len(s)
		return len(s), err
	})
	if err != nil {
		return sum, fmt.Errorf("story: reconcile: %w", err)
	}

	at(24*time.Hour + hms(15, 30, 0))
	c, err := w.Worker("worker-c")
	if err != nil {
		return sum, err
	}
	resC, err := courier.Carry(ctx, c, r, StepResubmission, true)
	if err != nil {
		return sum, fmt.Errorf("story: friday: %w", err)
	}
	if resC.Claim.Status == domain.StatusAlreadyConsumed {
		sum.ReplaysRejected++
	}
	line("Friday: 'resubmit all' sends a copy of %s under a new message id, naming %s: %s (%s), replay suspected %t, execution attempted %t",
		resA.Claim.Claimed.MessageID, r.Capability, resC.Claim.Status, resC.Claim.Reason, resC.Claim.ReplaySuspected, resC.Executed)

	l := w.Sim.Ledger().ByOperation[string(op)]
	sum.RefundsCreated, sum.ProviderRequests = l.RefundsCreated, l.RequestsReceived
	st, err := w.State(ctx, op)
	if err != nil {
		return sum, err
	}
	sum.FinalState = string(st.Status())
	return sum, nil
}

// untilSome calls f until it reports something, at most 500 times, 10ms
// apart: the log readers behind the sweeper and reconciler see an event only
// once every transaction that could precede it has ended.
func untilSome(ctx context.Context, f func() (int, error)) (int, error) {
	for range 500 {
		n, err := f()
		if err != nil || n > 0 {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return 0, errors.New("nothing to do after 5s")
}

// CrashAfterClaim is a worker's ledger for a process that dies right after
// its claim: nothing it would write later (renewals, outcomes) arrives.
type CrashAfterClaim struct{ worker.Ledger }

// ErrProcessGone is what a CrashAfterClaim ledger answers after the claim.
var ErrProcessGone = errors.New("process recycled")

// RenewLease implements worker.Ledger: the process is gone.
func (CrashAfterClaim) RenewLease(context.Context, domain.OperationID, domain.RenewLease, ledger.Cause) (domain.LeaseRenewed, error) {
	return domain.LeaseRenewed{}, ErrProcessGone
}

// RecordOutcome implements worker.Ledger: the process is gone.
func (CrashAfterClaim) RecordOutcome(context.Context, domain.OperationID, domain.RecordOutcome, ledger.Cause) error {
	return ErrProcessGone
}

// RecordLateOutcome implements worker.Ledger: the process is gone.
func (CrashAfterClaim) RecordLateOutcome(context.Context, domain.OperationID, domain.RecordLateOutcome, ledger.Cause) error {
	return ErrProcessGone
}

// EscalateLostEffect implements worker.Ledger: the process is gone.
func (CrashAfterClaim) EscalateLostEffect(context.Context, domain.OperationID, domain.EscalateLostEffect, ledger.Cause) (bool, error) {
	return false, ErrProcessGone
}
