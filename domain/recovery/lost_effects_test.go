package recovery_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/regression"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// loseClaim plays what a failover to an asynchronous standby does to op: a
// worker claimed it and the provider made the refund under the claim's key,
// then the store lost the claim (its stream ends at the capability again)
// and the handler's cache noticed (a LogRegressed naming the execution).
// It returns the refund's reference.
func (f *fixture) loseClaim(op domain.OperationID) string {
	f.t.Helper()
	c := f.executing(op)
	res := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: op, OrderID: "ORD-" + string(op), AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: c.IdempotencyKey})
	require.Equal(f.t, domain.Completed, res.Outcome)
	m := f.store.Store.(*memory.Store)
	m.LoseLast(1) // the claim, the log's latest event
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: f.store, Noticer: "worker-a", Clock: f.clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(f.t, err)
	rec.ObserveRegression(f.ctx, eventstore.Regression{Cache: domain.CacheWorker, Stream: op.StreamName(), SeenVersion: 3, HeldVersion: 2,
		Context: []domain.SeenExecution{{ExecutionID: c.ExecutionID, IdempotencyKey: c.IdempotencyKey, State: domain.ExecExecuting}}})
	return res.ProviderReference
}

// TestLostEffectEscalatedAfterARegression: the refund the provider made for
// a claim the store lost is found by the reconciler's lost-effect check —
// after the regression, with the read it has (a lookup by our reference,
// or by the key the cache knew) — and escalated to a person with the
// provider's reference, once; no lease would ever lapse for it.
func TestLostEffectEscalatedAfterARegression(t *testing.T) {
	for _, p := range []domain.ProviderProfile{provider.StripeV1, provider.Meridian} {
		t.Run(p.Name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{profile: p})
			ref := f.loseClaim("OP-LOST-1")
			r := f.reconciler(nil)
			steps, err := r.ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Len(t, steps, 1)
			require.Equal(t, recovery.VerdictLostEffect, steps[0].Verdict)
			require.Contains(t, steps[0].Detail, ref)
			s := f.state("OP-LOST-1")
			require.Equal(t, domain.OpEscalated, s.Status())
			x := s.CurrentExecution()
			require.Equal(t, ref, x.ProviderReference)
			require.Equal(t, domain.IdempotencyKey("refund-OP-LOST-1-a1"), x.IdempotencyKey)

			steps, err = r.ReconcileOnce(f.ctx)
			require.NoError(t, err)
			require.Empty(t, steps, "escalated once")
			require.Len(t, f.state("OP-LOST-1").Executions, 1)
		})
	}
}

// TestLostEffectOfALostOperation: the store lost the whole operation; the
// refund the provider made is evidence in the unattributed stream.
func TestLostEffectOfALostOperation(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c := f.executing("OP-GONE-1")
	res := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-GONE-1", OrderID: "ORD-OP-GONE-1", AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: c.IdempotencyKey})
	f.store.Store.(*memory.Store).LoseLast(4) // the whole operation
	rec, err := regression.NewRecorder(regression.RecorderConfig{Store: f.store, Noticer: "serve", Clock: f.clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rec.ObserveRegression(f.ctx, eventstore.Regression{Cache: domain.CacheState, Stream: "operation-OP-GONE-1", SeenVersion: 3,
		HeldVersion: eventstore.NoStreamVersion, Context: []domain.SeenExecution{{ExecutionID: c.ExecutionID, IdempotencyKey: c.IdempotencyKey}}})

	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.Export = f.export
	})
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	// Another cache notices the same loss; the export is read again after
	// it: the effect is escalated already, not again.
	rec.ObserveRegression(f.ctx, eventstore.Regression{Cache: domain.CacheHead, Stream: "operation-OP-GONE-1", SeenVersion: 3,
		HeldVersion: eventstore.NoStreamVersion})
	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Empty(t, steps, "escalated once")
	events, err := f.store.ReadStream(f.ctx, domain.UnattributedStreamFor(f.clock.Now()), 0, 10)
	require.NoError(t, err)
	require.Len(t, events, 1)
	d, err := codec.DecodeRecorded(events[0])
	require.NoError(t, err)
	ev := d.Event.(domain.LostEffectEscalated)
	require.Equal(t, res.ProviderReference, ev.ProviderReference)
	require.Equal(t, domain.LostEffectByLookup, ev.Source)
}

// TestLostEffectFoundInTheExport: with no regression recorded (every
// process that remembered the claim restarted), the scheduled read of the
// provider's export finds the refund no execution accounts for; refunds
// the ledger accounts for are not escalated, and the export is read again
// only when due.
func TestLostEffectFoundInTheExport(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	ok := f.executing("OP-KEPT-1")
	kept := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-KEPT-1", OrderID: "ORD-OP-KEPT-1", AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: ok.IdempotencyKey})
	require.NoError(t, f.h.RecordOutcome(f.ctx, "OP-KEPT-1", domain.RecordOutcome{ExecutionID: ok.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: f.secrets[ok.ExecutionID], Outcome: domain.Completed, ProviderReference: kept.ProviderReference}, ledger.Cause{Actor: "worker-a"}))
	c := f.executing("OP-LOST-2")
	lost := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-LOST-2", OrderID: "ORD-OP-LOST-2", AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: c.IdempotencyKey})
	f.store.Store.(*memory.Store).LoseLast(1)

	reads := 0
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.ExportEvery = time.Hour
		cfg.Export = func(ctx context.Context) (audit.ProviderExport, error) {
			reads++
			return f.export(ctx)
		}
	})
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1, "%v", steps)
	require.Equal(t, recovery.VerdictLostEffect, steps[0].Verdict)
	require.Equal(t, lost.ProviderReference, f.state("OP-LOST-2").CurrentExecution().ProviderReference)
	require.Equal(t, domain.OpCompleted, f.state("OP-KEPT-1").Status(), "accounted for: not escalated")

	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Empty(t, steps)
	require.Equal(t, 1, reads, "read again only when due")
	f.clock.Advance(time.Hour)
	_, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, reads)
}

// TestLostEffectCheckFailedIsCheckedAgain: an effect of the export whose
// check failed (its stream could not be read) is the first the next round
// checks, without waiting for the export's next scheduled read.
func TestLostEffectCheckFailedIsCheckedAgain(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c := f.executing("OP-LOST-3")
	lost := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-LOST-3", OrderID: "ORD-OP-LOST-3", AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: c.IdempotencyKey})
	f.store.Store.(*memory.Store).LoseLast(1)

	reads := 0
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.ExportEvery = time.Hour
		cfg.Export = func(ctx context.Context) (audit.ProviderExport, error) {
			reads++
			return f.export(ctx)
		}
	})
	f.store.setDown("operation-OP-LOST-3", true)
	steps, err := r.ReconcileOnce(f.ctx)
	require.Error(t, err, "the check of the lost effect failed")
	require.Empty(t, steps)
	f.store.setDown("operation-OP-LOST-3", false)

	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1, "checked again in the next round: %v", steps)
	require.Equal(t, lost.ProviderReference, f.state("OP-LOST-3").CurrentExecution().ProviderReference)
	require.Equal(t, 2, reads, "a read not checked to its end is read again in the next round")
}

// TestLostEffectUnderAnOpenExecutionIsCheckedAgain: an effect of the export
// under the key of an execution still open is accounted for only while it
// is open. When the execution completes with another effect (the same key
// past the provider's key retention makes a new refund), the next read of
// the export escalates the first.
func TestLostEffectUnderAnOpenExecutionIsCheckedAgain(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	c := f.executing("OP-LOST-4")
	first := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: "OP-LOST-4", OrderID: "ORD-OP-LOST-4", AmountMinor: 12_000,
		Currency: "EUR", IdempotencyKey: c.IdempotencyKey})
	require.Equal(t, domain.Completed, first.Outcome)
	r := f.reconciler(func(cfg *recovery.ReconcilerConfig) {
		cfg.ExportEvery = time.Hour
		cfg.Export = f.export
	})
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Empty(t, steps, "the open execution under its key accounts for it")

	require.NoError(t, f.h.RecordOutcome(f.ctx, "OP-LOST-4", domain.RecordOutcome{ExecutionID: c.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: f.secrets[c.ExecutionID], Outcome: domain.Completed, ProviderReference: "re_another"}, ledger.Cause{Actor: "worker-a"}))
	f.clock.Advance(time.Hour)
	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1, "%v", steps)
	require.Equal(t, recovery.VerdictLostEffect, steps[0].Verdict)
	require.Equal(t, first.ProviderReference, f.state("OP-LOST-4").CurrentExecution().ProviderReference)
}

// TestLostEffectAskedAgainWhileAnExecutionIsOpen: after a regression, an
// effect accounted for only by an execution still open under its key (a
// claim made again after the loss) is asked about again each round; when
// that execution ends NotApplied (its own request made nothing), the lost
// effect is escalated — with no export to read.
func TestLostEffectAskedAgainWhileAnExecutionIsOpen(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	ref := f.loseClaim("OP-LOST-5")
	caps := f.state("OP-LOST-5").Capabilities
	require.Len(t, caps, 1)
	var capID domain.CapabilityID
	for id := range caps {
		capID = id
	}
	out, err := f.h.Claim(f.ctx, "OP-LOST-5", domain.Claim{MessageID: "MSG-OP-LOST-5", CapabilityID: capID, WorkerID: "worker-b",
		CorrelationID: "COR-OP-LOST-5"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusClaimed, out.Status, "claimed again: %s", out.Reason)

	r := f.reconciler(nil)
	steps, err := r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Empty(t, steps, "the open execution under its key accounts for it, for now")

	require.NoError(t, f.h.RecordOutcome(f.ctx, "OP-LOST-5", domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1,
		LeaseSecret: out.LeaseSecret, Outcome: domain.NotApplied, Detail: "connection refused"}, ledger.Cause{Actor: "worker-b"}))
	steps, err = r.ReconcileOnce(f.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1, "%v", steps)
	require.Equal(t, recovery.VerdictLostEffect, steps[0].Verdict)
	require.Equal(t, ref, f.state("OP-LOST-5").CurrentExecution().ProviderReference)
}

// export reads the simulator's ledger export as the reconciler's lost-effect
// check reads the provider's.
func (f *fixture) export(context.Context) (audit.ProviderExport, error) {
	var b bytes.Buffer
	if err := f.sim.WriteLedgerExport(&b); err != nil {
		return nil, err
	}
	return provider.ExportReader(f.profile.Name, &b)
}
