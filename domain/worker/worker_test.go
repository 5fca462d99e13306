package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// TestClaimExecuteRecord: a delivery is claimed, sent once under the key
// the decision derived, and its Completed recorded under the lease; the
// same message again is a duplicate that sends nothing.
func TestClaimExecuteRecord(t *testing.T) {
	r := newRig(t)
	s, p := r.simulator()
	w := r.worker(p)

	res, err := w.Handle(t.Context(), r.delivery("MSG-55A"))
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, res.Claim.Status)
	require.True(t, res.Executed)
	require.Equal(t, domain.Completed, res.Outcome)
	require.Equal(t, "outcome", res.Recorded)
	require.NotEmpty(t, res.Reference)

	st := r.state()
	x := st.Executions[0]
	require.Equal(t, domain.ExecCompleted, x.State)
	require.Equal(t, res.Reference, x.ProviderReference)
	require.Equal(t, domain.IdempotencyKey("refund-OP-4471-a1"), x.IdempotencyKey)
	require.Len(t, x.HeldLeases, 1, "the claim bound the lease to this worker")

	dup, err := w.Handle(t.Context(), r.delivery("MSG-55A"))
	require.NoError(t, err)
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Claim.Status)
	require.False(t, dup.Executed)

	l := s.Ledger().ByOperation[string(r.op)]
	require.Equal(t, 1, l.RequestsReceived, "one request")
	require.Equal(t, 1, l.RefundsCreated, "one refund")
	require.Empty(t, r.paused(), "nothing had to be retried")
}

// TestRefusedClaimSendsNothing: spent or unknown authority never reaches
// the provider.
func TestRefusedClaimSendsNothing(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(func(context.Context) domain.RefundResult { return domain.RefundResult{Outcome: domain.Completed} })
	w := r.worker(p)
	d := r.delivery("MSG-1")
	d.CapabilityID = "CAP-NOPE"
	res, err := w.Handle(t.Context(), d)
	require.NoError(t, err)
	require.Equal(t, domain.StatusInvalid, res.Claim.Status)
	require.False(t, res.Executed)
	calls, _ := p.snapshot()
	require.Zero(t, calls)
	require.Equal(t, 1, r.count(domain.TypePresentationRejected))
}

// TestLeaseRenewedEveryThird: while the provider call runs, the worker
// renews its lease a third of the way through, under its epoch and secret;
// the outcome is then recorded under the renewed lease.
func TestLeaseRenewedEveryThird(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(func(context.Context) domain.RefundResult {
		return domain.RefundResult{Outcome: domain.Completed, ProviderReference: "re_1", Detail: "201"}
	})
	p.release = make(chan struct{})
	done := handle(t.Context(), r.worker(p), r.delivery("MSG-1"))
	<-p.started

	for i := 1; i <= 2; i++ {
		timer := r.nextRenewal()
		now := r.clk.Advance(renewEvery)
		timer <- now
		eventually(t, "a renewal", func() bool { return r.count(domain.TypeLeaseRenewed) == i })
		require.Equal(t, now.Add(lease), r.state().Executions[0].LeaseExpiresAt)
	}
	// Two thirds and more of the first lease have passed: without the
	// renewals the sweeper could take it now.
	r.clk.Advance(renewEvery + time.Second)
	_, err := r.h.LapseLease(t.Context(), r.op, domain.LapseLease{ExecutionID: r.state().Executions[0].ID}, ledger.Cause{Actor: "sweeper"})
	require.Error(t, err, "the renewed lease is still running")

	close(p.release)
	h := r.wait(done)
	require.NoError(t, h.err)
	require.Equal(t, "outcome", h.res.Recorded)
	require.Equal(t, domain.ExecCompleted, r.state().Executions[0].State)
	require.Zero(t, r.count(domain.TypeWriteRefused))
}

// TestLeaseLostMidCallCancelsTheCall: the lease lapses while the provider
// call runs (the worker stalled); the next renewal is refused, which cancels
// the call's context at once. The ambiguous result is not recorded as an
// outcome (the execution is Unknown already) and nothing is guessed.
func TestLeaseLostMidCallCancelsTheCall(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(func(ctx context.Context) domain.RefundResult {
		return domain.RefundResult{Outcome: domain.Unknown, Detail: "cancelled mid-request: " + ctx.Err().Error()}
	})
	p.release = make(chan struct{}) // never released: only the lease-loss context ends the call
	done := handle(t.Context(), r.worker(p), r.delivery("MSG-1"))
	<-p.started
	timer := r.nextRenewal()

	r.clk.Advance(lease)
	x := r.state().Executions[0].ID
	_, err := r.h.LapseLease(t.Context(), r.op, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	timer <- r.clk.Now()

	h := r.wait(done)
	require.NoError(t, h.err)
	_, ctxErr := p.snapshot()
	require.ErrorIs(t, ctxErr, context.Canceled, "the call's context was cancelled by the lease loss")
	require.True(t, h.res.Executed)
	require.Equal(t, domain.Unknown, h.res.Outcome)
	require.Empty(t, h.res.Recorded)

	st := r.state()
	require.Equal(t, domain.ExecUnknown, st.Execution(x).State)
	require.Equal(t, int64(2), st.Execution(x).LeaseEpoch)
	var refused []domain.WriteRefused
	for _, e := range r.events() {
		if w, ok := e.(domain.WriteRefused); ok {
			refused = append(refused, w)
		}
	}
	require.Len(t, refused, 2, "the refused renewal and the refused outcome are evidence")
	require.Equal(t, domain.CommandRenewLease, refused[0].Command)
	require.Equal(t, domain.CommandRecordOutcome, refused[1].Command)
	for _, w := range refused {
		require.Equal(t, domain.ReasonLeaseLost, w.Reason)
		require.Equal(t, domain.SecretHeld, w.SecretCheck, "it was the holder, late")
	}
	require.Zero(t, r.count(domain.TypeLateOutcomeRecorded), "an Unknown is never late evidence")
}

// TestLeaseLostThenDefiniteOutcomeIsLateEvidence: the lease was lost while
// the request was in flight, and the provider's answer is definite: the
// worker hands it in as late evidence for its own Unknown execution.
func TestLeaseLostThenDefiniteOutcomeIsLateEvidence(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(func(context.Context) domain.RefundResult {
		return domain.RefundResult{Outcome: domain.Completed, ProviderReference: "re_late", Detail: "201 after the lease was lost"}
	})
	p.release = make(chan struct{})
	done := handle(t.Context(), r.worker(p), r.delivery("MSG-1"))
	<-p.started
	timer := r.nextRenewal()
	r.clk.Advance(lease)
	x := r.state().Executions[0].ID
	_, err := r.h.LapseLease(t.Context(), r.op, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	timer <- r.clk.Now()

	h := r.wait(done)
	require.NoError(t, h.err)
	require.Equal(t, "late-outcome", h.res.Recorded)
	require.Equal(t, domain.ExecCompleted, r.state().Execution(x).State)
	require.Equal(t, "re_late", r.state().Execution(x).ProviderReference)
	require.Equal(t, 1, r.count(domain.TypeLateOutcomeRecorded))
}

// TestDefiniteOutcomeSurvivesAStoreOutageShorterThanTheLease: the provider
// created the refund, then the store is unreachable for 30 s (a database
// restart, longer than the old fixed retry of about 1.5 s): the worker keeps
// trying, its back-off capped at 1 s, and records Completed when the store is
// back. The provider saw one request, and the ledger holds Completed.
func TestDefiniteOutcomeSurvivesAStoreOutageShorterThanTheLease(t *testing.T) {
	r := newRig(t)
	s, client := r.simulator()
	var outageEnds time.Time
	p := afterCall{Provider: client, then: func() {
		outageEnds = r.clk.Now().Add(30 * time.Second)
		r.store.SetUnavailable(true)
	}}
	r.onPause = func(now time.Time) {
		if !now.Before(outageEnds) {
			r.store.SetUnavailable(false)
		}
	}
	res, err := r.worker(p).Handle(t.Context(), r.delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, domain.Completed, res.Outcome)
	require.Equal(t, "outcome", res.Recorded, "a known result is not turned into Unknown by a short outage")

	st := r.state()
	require.Equal(t, domain.ExecCompleted, st.Executions[0].State)
	require.Equal(t, res.Reference, st.Executions[0].ProviderReference)
	l := s.Ledger().ByOperation[string(r.op)]
	require.Equal(t, 1, l.RequestsReceived, "exactly one request")
	require.Equal(t, 1, l.RefundsCreated)

	pauses := r.paused()
	require.Greater(t, len(pauses), 5, "more than the old five attempts")
	require.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second}, pauses[:5])
	for _, d := range pauses {
		require.LessOrEqual(t, d, time.Second, "back-off capped")
	}
	require.True(t, r.clk.Now().Before(start.Add(lease)), "recorded within the first lease")
}

// TestRenewsWhileRetryingWhenTheStoreAnswers: the outcome's appends fail for
// longer than the lease while the store still answers renewals: the worker
// keeps its lease alive meanwhile and records Completed after the first
// lease would have expired.
func TestRenewsWhileRetryingWhenTheStoreAnswers(t *testing.T) {
	r := newRig(t)
	_, client := r.simulator()
	var healed time.Time
	p := afterCall{Provider: client, then: func() {
		healed = r.clk.Now().Add(lease + 10*time.Second)
		r.store.failAppends(domain.TypeOutcomeRecorded)
	}}
	r.onPause = func(now time.Time) {
		if !now.Before(healed) {
			r.store.failAppends("")
		}
	}
	res, err := r.worker(p).Handle(t.Context(), r.delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, "outcome", res.Recorded)
	require.True(t, r.clk.Now().After(start.Add(lease)), "recorded after the first lease's expiry")
	require.GreaterOrEqual(t, r.count(domain.TypeLeaseRenewed), 3, "renewed while retrying")
	require.Equal(t, domain.ExecCompleted, r.state().Executions[0].State)
	require.Zero(t, r.count(domain.TypeWriteRefused))
}

// TestStoreDownPastTheLeaseRecordsNothing: the store stays unreachable past
// the lease's expiry: the worker stops trying at the expiry (bounded), the
// outcome is not recorded and nothing is guessed; once the store is back the
// lease lapses to Unknown, for the reconciler to ask the provider.
func TestStoreDownPastTheLeaseRecordsNothing(t *testing.T) {
	r := newRig(t)
	s, client := r.simulator()
	p := afterCall{Provider: client, then: func() { r.store.SetUnavailable(true) }}
	res, err := r.worker(p).Handle(t.Context(), r.delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, domain.Completed, res.Outcome, "the provider did create it")
	require.Empty(t, res.Recorded, "but it could not be recorded")
	require.False(t, r.clk.Now().Before(start.Add(lease)), "it tried until the lease expired")
	require.Less(t, r.clk.Now(), start.Add(lease+2*time.Second), "and stopped there")
	require.Less(t, len(r.paused()), int(lease/(100*time.Millisecond))+1, "a bounded number of attempts")

	r.store.SetUnavailable(false)
	st := r.state()
	x := st.Executions[0]
	require.Equal(t, domain.ExecExecuting, x.State, "nothing was guessed")
	require.Zero(t, r.count(domain.TypeOutcomeRecorded))
	_, err = r.h.LapseLease(t.Context(), r.op, domain.LapseLease{ExecutionID: x.ID}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	require.Equal(t, domain.ExecUnknown, r.state().Executions[0].State)
	require.Equal(t, 1, s.Ledger().ByOperation[string(r.op)].RefundsCreated)
}

// TestAbandonStopsRecordingAndSaysWhatIsLost: the store is unreachable
// after the provider created the refund, and the process stops (Abandon
// ends, its shutdown timeout passed) long before the lease would: the
// worker gives up at once, recording nothing and guessing nothing, and its
// log names the execution, the outcome and the provider's reference, for a
// person; the lease then lapses to Unknown for the reconciler.
func TestAbandonStopsRecordingAndSaysWhatIsLost(t *testing.T) {
	r := newRig(t)
	s, client := r.simulator()
	var logs syncBuffer
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	p := afterCall{Provider: client, then: func() { r.store.SetUnavailable(true) }}
	r.onPause = func(now time.Time) {
		if len(r.paused()) == 3 { // three attempts into the outage, the shutdown timeout passes
			stop()
		}
	}
	w, err := worker.New(worker.Config{
		ID: "worker-a", Ledger: r.h, Provider: p, Clock: r.clk, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		LeaseDuration: lease, ProviderTimeout: 30 * time.Second, After: r.after, Abandon: stopping,
	})
	require.NoError(t, err)
	res, err := w.Handle(t.Context(), r.delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, domain.Completed, res.Outcome, "the provider did create it")
	require.Empty(t, res.Recorded, "not recorded")
	require.LessOrEqual(t, len(r.paused()), 4, "it stopped trying when told")
	require.Less(t, r.clk.Now(), start.Add(5*time.Second), "long before the lease expired")
	text := logs.String()
	require.Contains(t, text, "stopping: outcome not recorded before the shutdown timeout")
	require.Contains(t, text, "execution_id="+string(res.Claim.ExecutionID))
	require.Contains(t, text, "outcome=Completed")
	require.Contains(t, text, "provider_reference="+res.Reference)
	require.NotEmpty(t, res.Reference)

	r.store.SetUnavailable(false)
	require.Equal(t, domain.ExecExecuting, r.state().Executions[0].State, "nothing was guessed")
	r.clk.Advance(lease)
	_, err = r.h.LapseLease(t.Context(), r.op, domain.LapseLease{ExecutionID: r.state().Executions[0].ID}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	require.Equal(t, domain.ExecUnknown, r.state().Executions[0].State)
	require.Equal(t, 1, s.Ledger().ByOperation[string(r.op)].RefundsCreated)
}

// TestHostileProviderTextIsRecordedEscaped: the provider's message carries
// control and format characters the ledger cannot store: the definite
// outcome is still recorded, the text escaped, and the detail says so.
func TestHostileProviderTextIsRecordedEscaped(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(func(context.Context) domain.RefundResult {
		return domain.RefundResult{Outcome: domain.Completed, ProviderReference: "re_1\x00", Detail: "created\x1b[2J\u202e" + strings.Repeat("x", domain.MaxTextLength)}
	})
	res, err := r.worker(p).Handle(t.Context(), r.delivery("MSG-1"))
	require.NoError(t, err)
	require.Equal(t, "outcome", res.Recorded)
	var rec domain.OutcomeRecorded
	for _, e := range r.events() {
		if o, ok := e.(domain.OutcomeRecorded); ok {
			rec = o
		}
	}
	require.Equal(t, domain.Completed, rec.Outcome)
	require.Equal(t, `re_1\x00`, rec.ProviderReference)
	require.True(t, strings.HasPrefix(rec.Detail, "[provider text escaped] created\\x1b[2J\\u202e"), rec.Detail[:60])
	require.LessOrEqual(t, len(rec.Detail), domain.MaxTextLength)
	require.Nil(t, domain.CheckText("detail", rec.Detail, domain.MaxTextLength, false))
	require.Equal(t, domain.ExecCompleted, r.state().Executions[0].State)
	require.Zero(t, r.count(domain.TypeWriteRefused))
}

// TestConfigIsValidated: the lease must outlast the provider call; the
// back-off must be positive and under its cap.
func TestConfigIsValidated(t *testing.T) {
	r := newRig(t)
	p := newFakeProvider(nil)
	for name, cfg := range map[string]worker.Config{
		"no id":              {Ledger: r.h, Provider: p},
		"lease too short":    {ID: "w", Ledger: r.h, Provider: p, LeaseDuration: 10 * time.Second, ProviderTimeout: 10 * time.Second},
		"back-off above cap": {ID: "w", Ledger: r.h, Provider: p, RecordBackoff: 2 * time.Second, RecordBackoffMax: time.Second},
		"negative back-off":  {ID: "w", Ledger: r.h, Provider: p, RecordBackoff: -time.Second},
	} {
		_, err := worker.New(cfg)
		require.Error(t, err, name)
	}
	_, err := worker.New(worker.Config{ID: "w", Ledger: r.h, Provider: p})
	require.NoError(t, err)
}
