// Package worker is the executing role: it turns one delivery into at most
// one provider request under a claimed, leased execution, and records the
// result conditional on its lease epoch.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
)

// Ledger is what the worker needs of the command handler. *ledger.Handler
// implements it; so can a client of the HTTP API.
type Ledger interface {
	Claim(ctx context.Context, op domain.OperationID, cmd domain.Claim) (ledger.ClaimOutcome, error)
	RenewLease(ctx context.Context, op domain.OperationID, cmd domain.RenewLease) (domain.LeaseRenewed, error)
	RecordOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordOutcome, by ledger.Cause) error
	RecordLateOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordLateOutcome, by ledger.Cause) error
}

// Delivery is one transport message. It carries identifiers only: amounts and
// targets come from the ledger.
type Delivery struct {
	MessageID     domain.MessageID
	CorrelationID domain.CorrelationID
	OperationID   domain.OperationID
	CapabilityID  domain.CapabilityID
	// BoundOperation and BoundAttempt come from a verified capability token,
	// when the transport carried one.
	BoundOperation domain.OperationID
	BoundAttempt   int
}

// Result says what handling a delivery did.
type Result struct {
	Claim     domain.ClaimResult
	Executed  bool           // a provider request was started
	Outcome   domain.Outcome // the provider call's classified outcome, when Executed
	Reference string
	// Recorded is how the outcome entered the ledger: "outcome", "late-outcome",
	// or "" when it could not be recorded (the lease will lapse and
	// reconciliation will ask the provider).
	Recorded string
}

// Config configures a Worker. Zero values take defaults.
type Config struct {
	ID       string // required: names the lease owner
	Ledger   Ledger // required
	Provider domain.Provider
	Clock    clock.Clock
	Logger   *slog.Logger
	// LeaseDuration is asked for at claim (default domain.DefaultLeaseDuration)
	// and renewed every third of it. It must exceed ProviderTimeout, so a slow
	// but live worker is not swept.
	LeaseDuration time.Duration
	// ProviderTimeout is the longest one provider call may take, retries
	// included (default 30s). The worker bounds the call with it.
	ProviderTimeout time.Duration
	// RecordAttempts bounds how often recording the outcome is retried when
	// the store is unavailable (default 5); after that the lease lapses and
	// reconciliation takes over.
	RecordAttempts int
	RecordBackoff  time.Duration // default 100ms, doubled per retry
	// RecordTimeout bounds recording the outcome, retries included (default
	// 15s). Recording outlives the delivery's context: it is what we most
	// need to keep.
	RecordTimeout time.Duration
	// After waits for d on the wall clock (default time.After); tests may
	// substitute it to drive renewals.
	After func(d time.Duration) <-chan time.Time
}

// Worker handles deliveries. Safe for concurrent use.
type Worker struct{ cfg Config }

// New validates cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, domain.DefaultLeaseDuration)
	cfg.ProviderTimeout = cmp.Or(cfg.ProviderTimeout, 30*time.Second)
	cfg.RecordAttempts = cmp.Or(cfg.RecordAttempts, 5)
	cfg.RecordBackoff = cmp.Or(cfg.RecordBackoff, 100*time.Millisecond)
	cfg.RecordTimeout = cmp.Or(cfg.RecordTimeout, 15*time.Second)
	switch {
	case cfg.ID == "":
		return nil, errors.New("worker: config: ID is required")
	case cfg.Ledger == nil || cfg.Provider == nil:
		return nil, errors.New("worker: config: Ledger and Provider are required")
	case cfg.LeaseDuration <= cfg.ProviderTimeout:
		return nil, fmt.Errorf("worker: config: lease %s must be longer than the provider timeout %s", cfg.LeaseDuration, cfg.ProviderTimeout)
	case cfg.LeaseDuration > domain.MaxLeaseDuration:
		return nil, fmt.Errorf("worker: config: lease %s longer than %s", cfg.LeaseDuration, domain.MaxLeaseDuration)
	}
	return &Worker{cfg: cfg}, nil
}

// Handle claims the delivery's capability and, only if Claimed, executes the
// refund once under a held lease and records the outcome under its epoch.
//
// It returns an error only when the delivery's result could not be recorded
// at claim time (the store unavailable, say): then nothing was executed and
// the transport must not acknowledge the message. Every other result,
// including every refusal, was recorded, and the message may be acknowledged.
func (w *Worker) Handle(ctx context.Context, d Delivery) (Result, error) {
	log := w.cfg.Logger.With("message_id", d.MessageID, "operation_id", d.OperationID, "worker", w.cfg.ID)
	claim, err := w.cfg.Ledger.Claim(ctx, d.OperationID, domain.Claim{
		MessageID: d.MessageID, CorrelationID: d.CorrelationID, CapabilityID: d.CapabilityID,
		WorkerID: w.cfg.ID, LeaseDuration: w.cfg.LeaseDuration,
		BoundOperation: d.BoundOperation, BoundAttempt: d.BoundAttempt,
	})
	if err != nil {
		var refusal *domain.Refusal
		if errors.As(err, &refusal) && refusal.Reason == domain.ReasonCommandInvalid {
			return Result{}, fmt.Errorf("%w: %v", ErrMalformedDelivery, refusal)
		}
		return Result{}, fmt.Errorf("claim %s: %w", d.MessageID, err)
	}
	res := Result{Claim: claim.ClaimResult}
	if claim.Status != domain.StatusClaimed {
		// Never execute, never infer the first attempt's fate from a duplicate.
		log.InfoContext(ctx, "not executing", "status", claim.Status, "reason", claim.Reason, "replay_suspected", claim.ReplaySuspected)
		return res, nil
	}
	c := claim.Claimed
	op := claim.Operation
	// The key comes from the decision: derived from operation and attempt,
	// fixed before any retry logic runs.
	req := domain.RefundRequest{
		OperationID: op.ID, OrderID: op.OrderID, AmountMinor: op.AmountMinor, Currency: op.Currency,
		IdempotencyKey: c.IdempotencyKey,
	}
	lease := w.holdLease(ctx, d.OperationID, c, log)
	callCtx, cancelCall := context.WithTimeout(lease.ctx, w.cfg.ProviderTimeout)
	result := w.cfg.Provider.CreateRefund(callCtx, req)
	cancelCall()
	lost := lease.stop()
	res.Executed, res.Outcome, res.Reference = true, result.Outcome, result.ProviderReference
	log = log.With("execution_id", c.ExecutionID, "outcome", result.Outcome, "provider_reference", result.ProviderReference)

	// What the provider said must reach the ledger even if the delivery's
	// context ends now (a shutdown): record on a detached, bounded context.
	recordCtx, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.RecordTimeout)
	defer cancelRecord()
	res.Recorded = w.record(recordCtx, d.OperationID, c, result, lost, log)
	return res, nil
}

// ErrMalformedDelivery marks a delivery the ledger refused as malformed (a bad
// identifier). Transports dead-letter it.
var ErrMalformedDelivery = errors.New("malformed delivery")

// record writes the outcome under the epoch; if the lease was lost, a
// definite outcome may only be recorded as late evidence for this execution.
func (w *Worker) record(ctx context.Context, op domain.OperationID, c *domain.Claimed, r domain.RefundResult, lost bool, log *slog.Logger) string {
	by := ledger.Cause{Actor: w.cfg.ID, CausationID: string(c.ExecutionID)}
	err := w.retry(ctx, func() error {
		return w.cfg.Ledger.RecordOutcome(ctx, op, domain.RecordOutcome{
			ExecutionID: c.ExecutionID, LeaseEpoch: c.LeaseEpoch, Outcome: r.Outcome,
			ProviderReference: r.ProviderReference, Detail: r.Detail,
		}, by)
	})
	if err == nil {
		return "outcome"
	}
	var refusal *domain.Refusal
	if !errors.As(err, &refusal) || refusal.Reason != domain.ReasonLeaseLost {
		log.ErrorContext(ctx, "outcome not recorded; the lease will lapse and reconciliation will ask the provider", "err", err)
		return ""
	}
	log.WarnContext(ctx, "lease lost while executing", "lost_before_record", lost)
	if !r.Outcome.Definite() {
		return ""
	}
	err = w.retry(ctx, func() error {
		return w.cfg.Ledger.RecordLateOutcome(ctx, op, domain.RecordLateOutcome{
			ExecutionID: c.ExecutionID, LeaseEpoch: c.LeaseEpoch, Outcome: r.Outcome,
			ProviderReference: r.ProviderReference, Detail: r.Detail,
		}, by)
	})
	if err != nil {
		log.WarnContext(ctx, "late outcome not recorded", "err", err)
		return ""
	}
	return "late-outcome"
}

// retry runs f until it succeeds, fails with anything but an unavailable
// store, or RecordAttempts is spent.
func (w *Worker) retry(ctx context.Context, f func() error) error {
	backoff := w.cfg.RecordBackoff
	var err error
	for i := 0; i < w.cfg.RecordAttempts; i++ {
		if err = f(); err == nil || !isUnavailable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-w.cfg.After(backoff):
		}
		backoff *= 2
	}
	return err
}
