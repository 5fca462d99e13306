package httpapi

import (
	"context"
	"errors"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// InstrumentLedger wraps a worker's ledger so that its claims and refused
// writes are counted in m, as the API counts its own: pass the result as
// worker.Config.Ledger. Behaviour is unchanged.
func InstrumentLedger(l worker.Ledger, m *Metrics) worker.Ledger {
	return &instrumentedLedger{next: l, m: m}
}

type instrumentedLedger struct {
	next worker.Ledger
	m    *Metrics
}

func (l *instrumentedLedger) Claim(ctx context.Context, op domain.OperationID, cmd domain.Claim) (ledger.ClaimOutcome, error) {
	out, err := l.next.Claim(ctx, op, cmd)
	if err == nil {
		l.m.ObserveClaim(out.Status, out.Reason)
	}
	l.refused(err)
	return out, err
}

func (l *instrumentedLedger) RenewLease(ctx context.Context, op domain.OperationID, cmd domain.RenewLease, by ledger.Cause) (domain.LeaseRenewed, error) {
	ev, err := l.next.RenewLease(ctx, op, cmd, by)
	l.refused(err)
	return ev, err
}

func (l *instrumentedLedger) RecordOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordOutcome, by ledger.Cause) error {
	err := l.next.RecordOutcome(ctx, op, cmd, by)
	l.refused(err)
	return err
}

func (l *instrumentedLedger) RecordLateOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordLateOutcome, by ledger.Cause) error {
	err := l.next.RecordLateOutcome(ctx, op, cmd, by)
	l.refused(err)
	return err
}

// EscalateLostEffect counts the lost effect escalated
// (opledger_lost_effects_escalated_total).
func (l *instrumentedLedger) EscalateLostEffect(ctx context.Context, op domain.OperationID, cmd domain.EscalateLostEffect, by ledger.Cause) (bool, error) {
	escalated, err := l.next.EscalateLostEffect(ctx, op, cmd, by)
	if escalated {
		l.m.ObserveLostEffect()
	}
	return escalated, err
}

func (l *instrumentedLedger) refused(err error) {
	var r *domain.Refusal
	if errors.As(err, &r) {
		l.m.ObserveRefusal(r.Reason)
	}
}
