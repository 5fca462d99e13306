// Package worker is the executing role: it turns one delivery into at most
// one effect request (a refund at the payment provider, a delivery at the
// export-delivery service: the executor of the operation's kind) under a
// claimed, leased execution, and records the result conditional on its
// lease epoch.
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
	RenewLease(ctx context.Context, op domain.OperationID, cmd domain.RenewLease, by ledger.Cause) (domain.LeaseRenewed, error)
	RecordOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordOutcome, by ledger.Cause) error
	RecordLateOutcome(ctx context.Context, op domain.OperationID, cmd domain.RecordLateOutcome, by ledger.Cause) error
	// EscalateLostEffect records the executor's answer for an execution
	// the store no longer knows (it lost the claim: a failover that lost
	// acknowledged writes): an Escalated execution in the operation's
	// stream, or evidence in the unattributed stream when the operation is
	// gone; nothing when an execution accounts for it already. It reports
	// whether an escalation was recorded.
	EscalateLostEffect(ctx context.Context, op domain.OperationID, cmd domain.EscalateLostEffect, by ledger.Cause) (bool, error)
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
	Executed  bool           // a provider call was made (not when the lease expired first)
	Outcome   domain.Outcome // the provider call's classified outcome (NotApplied when the lease expired first)
	Reference string
	// Recorded is how the outcome entered the ledger: "outcome",
	// "late-outcome", "lost-effect" (the store no longer knew the
	// execution: the answer is escalated to a person, or an execution
	// already accounts for it), or "" when it could not be recorded (the
	// lease will lapse and reconciliation will ask the provider).
	Recorded string
}

// Config configures a Worker. Zero values take defaults.
type Config struct {
	ID       string // required: names the lease owner
	Ledger   Ledger // required
	Provider domain.Provider
	// Exports executes export downloads (KindExportDownload). Optional: a
	// worker without it answers a claimed export download NotApplied
	// without sending anything (the use is spent; the holder presents
	// the capability again for its next use).
	Exports domain.ExportDeliverer
	Clock   clock.Clock
	Logger  *slog.Logger
	// LeaseDuration is asked for at claim (default domain.DefaultLeaseDuration)
	// and renewed every third of it. It must exceed ProviderTimeout, so a slow
	// but live worker is not swept.
	LeaseDuration time.Duration
	// ProviderTimeout is the longest one provider call may take, retries
	// included (default 30s). The worker bounds the call with it.
	ProviderTimeout time.Duration
	// RecordBackoff is the first pause between attempts to record the
	// outcome while the store is unavailable (default 100ms); it doubles per
	// retry up to RecordBackoffMax (default 1s). Recording a definite
	// outcome is retried for as long as the lease allows: until the lease
	// expires by Clock (the worker renews it meanwhile whenever the store
	// answers), so an outage shorter than the lease costs no known result.
	// When the lease expires first, the outcome is not recorded: the lease
	// lapses to Unknown and reconciliation asks the provider. At most
	// LeaseDuration/RecordBackoff+1 attempts are made, whatever the clock
	// says.
	RecordBackoff    time.Duration
	RecordBackoffMax time.Duration
	// RecordTimeout bounds recording on the wall clock, late evidence
	// included (default: LeaseDuration). Recording outlives the delivery's
	// context: it is what we most need to keep.
	RecordTimeout time.Duration
	// After waits for d on the wall clock (default time.After): the pause
	// between renewals and between attempts to record. Tests substitute it
	// to drive both without sleeping.
	After func(d time.Duration) <-chan time.Time
	// Abandon, when it ends, ends every recording still in progress: the
	// process is stopping and may wait no longer (its shutdown timeout
	// passed, the store unreachable meanwhile). What could not be recorded
	// is logged with its execution, outcome and provider reference, and
	// left to the lease's lapse and the reconciler, who asks the provider.
	// Nil: recording is bounded by RecordTimeout alone.
	Abandon context.Context
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
	cfg.RecordBackoff = cmp.Or(cfg.RecordBackoff, 100*time.Millisecond)
	cfg.RecordBackoffMax = cmp.Or(cfg.RecordBackoffMax, time.Second)
	cfg.RecordTimeout = cmp.Or(cfg.RecordTimeout, cfg.LeaseDuration)
	switch {
	case cfg.ID == "":
		return nil, errors.New("worker: config: ID is required")
	case cfg.Ledger == nil || cfg.Provider == nil:
		return nil, errors.New("worker: config: Ledger and Provider are required")
	case cfg.LeaseDuration <= cfg.ProviderTimeout:
		return nil, fmt.Errorf("worker: config: lease %s must be longer than the provider timeout %s", cfg.LeaseDuration, cfg.ProviderTimeout)
	case cfg.LeaseDuration > domain.MaxLeaseDuration:
		return nil, fmt.Errorf("worker: config: lease %s longer than %s", cfg.LeaseDuration, domain.MaxLeaseDuration)
	case cfg.RecordBackoff < 0 || cfg.RecordBackoffMax < cfg.RecordBackoff || cfg.RecordTimeout < 0:
		return nil, fmt.Errorf("worker: config: record backoff %s must be positive and at most its maximum %s, the record timeout positive",
			cfg.RecordBackoff, cfg.RecordBackoffMax)
	}
	return &Worker{cfg: cfg}, nil
}

// Handle claims the delivery's capability (one use of it) and, only if
// Claimed, executes the operation's effect once under a held lease, with
// the use's key, and records the outcome under its epoch.
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
	var (
		result  domain.EffectResult
		lost    bool
		expires = c.LeaseExpiresAt
	)
	if timeout := w.CallTimeout(c.LeaseExpiresAt); timeout > 0 {
		lease := w.holdLease(ctx, d.OperationID, c, claim.LeaseSecret, log)
		callCtx, cancelCall := context.WithTimeout(lease.ctx, timeout)
		result = w.execute(callCtx, claim.Operation, c)
		cancelCall()
		lost, expires = lease.stop()
		res.Executed = true
	} else {
		result = domain.EffectResult{Outcome: domain.NotApplied, Detail: "not sent: the lease expired at " +
			c.LeaseExpiresAt.UTC().Format(time.RFC3339Nano) + " before the request could be sent"}
	}
	res.Outcome, res.Reference = result.Outcome, result.ProviderReference
	log = log.With("execution_id", c.ExecutionID, "outcome", result.Outcome, "provider_reference", result.ProviderReference)

	// What the provider said must reach the ledger even if the delivery's
	// context ends now (a shutdown): record on a detached, bounded context.
	recordCtx, cancelRecord := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.RecordTimeout)
	defer cancelRecord()
	if w.cfg.Abandon != nil {
		defer context.AfterFunc(w.cfg.Abandon, cancelRecord)()
	}
	res.Recorded = w.record(recordCtx, held{op: d.OperationID, c: c, state: claim.Operation, secret: claim.LeaseSecret, lost: lost, expires: expires}, result, log)
	return res, nil
}

// CallTimeout is how long the provider call of a lease expiring at expires
// may take, from now by Clock: ProviderTimeout, or less when the lease has
// less left (its claim was written late, or handled late), and 0 when it has
// expired: then nothing is sent. Every request of an execution leaves while
// its lease holds, because once it expired the sweeper may make it Unknown
// and the reconciler resend the request under the same key (found by the
// simulator: a claim decided before a long pause was written already
// expired, and the worker's resend under a lapsed lease re-executed a key
// the reconciler had just found failed).
func (w *Worker) CallTimeout(expires time.Time) time.Duration {
	return min(w.cfg.ProviderTimeout, expires.Sub(w.cfg.Clock.Now()))
}

// execute makes the claimed execution's one effect request through the
// executor of the operation's kind. What it asks for (amount, currency and
// order; the export) comes from the ledger, never from the message; the key
// is the claim's, derived from operation, attempt and use and fixed before
// any retry logic runs.
func (w *Worker) execute(ctx context.Context, op *domain.Operation, c *domain.Claimed) domain.EffectResult {
	if op.Kind == domain.KindExportDownload {
		if w.cfg.Exports == nil {
			return domain.EffectResult{Outcome: domain.NotApplied,
				Detail: "not sent: this worker has no export-delivery executor (the use is spent; present the capability again for the next)"}
		}
		return w.cfg.Exports.DeliverExport(ctx, domain.ExportDelivery{
			OperationID: op.ID, ExportID: op.ExportID, Use: c.Use, IdempotencyKey: c.IdempotencyKey,
		})
	}
	return w.cfg.Provider.CreateRefund(ctx, domain.RefundRequest{
		OperationID: op.ID, OrderID: op.OrderID, AmountMinor: op.AmountMinor, Currency: op.Currency,
		IdempotencyKey: c.IdempotencyKey,
	})
}

// held is the lease a worker recorded under: its execution, the secret the
// claim returned (never logged), whether it was lost during the call and its
// expiry as last confirmed.
type held struct {
	op      domain.OperationID
	c       *domain.Claimed
	state   *domain.Operation // the operation as the claim left it
	secret  string
	lost    bool
	expires time.Time
}

// ErrMalformedDelivery marks a delivery the ledger refused as malformed (a bad
// identifier). Transports dead-letter it.
var ErrMalformedDelivery = errors.New("malformed delivery")

// record writes the outcome under the lease; if the lease was lost, a
// definite outcome may only be recorded as late evidence for this execution.
func (w *Worker) record(ctx context.Context, l held, r domain.RefundResult, log *slog.Logger) string {
	r = sanitized(ctx, r, log)
	by := ledger.Cause{Actor: w.cfg.ID, CausationID: string(l.c.ExecutionID)}
	err := w.recordUnderLease(ctx, l, r, by, log)
	if err == nil {
		return "outcome"
	}
	var refusal *domain.Refusal
	if errors.As(err, &refusal) && (refusal.Reason == domain.ReasonExecutionUnknown || refusal.Reason == domain.ReasonOperationUnknown) {
		return w.recordLost(ctx, l, r, by, refusal, log)
	}
	if !errors.As(err, &refusal) || refusal.Reason != domain.ReasonLeaseLost {
		msg := "outcome not recorded; the lease will lapse and reconciliation will ask the provider"
		if w.abandoned() {
			msg = "stopping: outcome not recorded before the shutdown timeout; the lease will lapse and reconciliation will ask the provider"
		}
		log.ErrorContext(ctx, msg, "lease_epoch", l.c.LeaseEpoch, "idempotency_key", l.c.IdempotencyKey, "err", err)
		return ""
	}
	log.WarnContext(ctx, "lease lost while executing", "lost_before_record", l.lost)
	if !r.Outcome.Definite() {
		return ""
	}
	err = w.retry(ctx, func() error {
		return w.cfg.Ledger.RecordLateOutcome(ctx, l.op, domain.RecordLateOutcome{
			ExecutionID: l.c.ExecutionID, LeaseEpoch: l.c.LeaseEpoch, LeaseSecret: l.secret, Outcome: r.Outcome,
			ProviderReference: r.ProviderReference, Detail: r.Detail,
		}, by)
	})
	if err != nil {
		log.WarnContext(ctx, "late outcome not recorded", "err", err)
		return ""
	}
	return "late-outcome"
}

// abandoned reports whether Abandon ended.
func (w *Worker) abandoned() bool { return w.cfg.Abandon != nil && w.cfg.Abandon.Err() != nil }

// recordLost handles the answer to an execution the store no longer knows:
// its claim (or its whole operation) was lost, so no lease will lapse and
// no reconciliation will ask the provider about it. An effect the executor
// made, or may have made, is escalated to a person (an Escalated execution
// in the operation's stream, or evidence in the unattributed stream when
// the operation is gone); an answer that nothing was made needs no one.
func (w *Worker) recordLost(ctx context.Context, l held, r domain.RefundResult, by ledger.Cause, refusal *domain.Refusal, log *slog.Logger) string {
	log = log.With("lease_epoch", l.c.LeaseEpoch, "idempotency_key", l.c.IdempotencyKey, "refusal", refusal.Reason)
	if r.Outcome == domain.NotApplied {
		log.WarnContext(ctx, "the store no longer knows this execution (it lost the claim); the executor made nothing: nothing to escalate")
		return ""
	}
	cmd := domain.EscalateLostEffect{
		LostExecutionID: l.c.ExecutionID, IdempotencyKey: l.c.IdempotencyKey, ProviderReference: r.ProviderReference,
		Outcome: r.Outcome, Source: domain.LostEffectByWorker, Detail: r.Detail,
	}
	if s := l.state; s != nil {
		cmd.AmountMinor, cmd.Currency, cmd.ExportID = s.AmountMinor, s.Currency, s.ExportID
	}
	var escalated bool
	err := w.retry(ctx, func() error {
		var err error
		escalated, err = w.cfg.Ledger.EscalateLostEffect(ctx, l.op, cmd, by)
		return err
	})
	if err != nil {
		log.ErrorContext(ctx, "LOST EXECUTION: the store no longer knows this execution and its executor's answer could not be recorded; "+
			"the lost-effect check escalates the effect when it finds it at the executor", "err", err)
		return ""
	}
	if escalated {
		log.ErrorContext(ctx, "LOST EXECUTION: the store no longer knows this execution (it lost the claim); the executor's answer is escalated to a person")
	} else {
		log.WarnContext(ctx, "the store no longer knows this execution (it lost the claim); another execution accounts for the effect")
	}
	return "lost-effect"
}

// errLeaseExpired is wrapped when recording stopped because the lease expired
// while the store could not be written.
var errLeaseExpired = errors.New("the lease expired before the outcome could be recorded")

// recordUnderLease records r under the lease, retrying a transient failure
// while the lease allows, and renewing the lease every third of its length
// meanwhile (when the store answers a renewal, the lease, and so the time to
// record, is extended). It returns nil once recorded, the refusal of the
// record or of a renewal (the lease is lost), or the last store error once
// the lease expired by Clock, ctx ended or maxTries attempts were made.
func (w *Worker) recordUnderLease(ctx context.Context, l held, r domain.RefundResult, by ledger.Cause, log *slog.Logger) error {
	expires, renewedAt := l.expires, l.expires.Add(-w.cfg.LeaseDuration)
	backoff := w.cfg.RecordBackoff
	for try := 1; ; try++ {
		err := w.cfg.Ledger.RecordOutcome(ctx, l.op, domain.RecordOutcome{
			ExecutionID: l.c.ExecutionID, LeaseEpoch: l.c.LeaseEpoch, LeaseSecret: l.secret, Outcome: r.Outcome,
			ProviderReference: r.ProviderReference, Detail: r.Detail,
		}, by)
		if err == nil || !transient(err) || try >= w.maxTries() || ctx.Err() != nil || w.abandoned() {
			return err
		}
		if now := w.cfg.Clock.Now(); now.Sub(renewedAt) >= w.cfg.LeaseDuration/3 {
			renewed, rerr := w.cfg.Ledger.RenewLease(ctx, l.op, domain.RenewLease{
				ExecutionID: l.c.ExecutionID, LeaseEpoch: l.c.LeaseEpoch, LeaseSecret: l.secret, WorkerID: w.cfg.ID,
				LeaseDuration: w.cfg.LeaseDuration,
			}, by)
			var refusal *domain.Refusal
			switch {
			case rerr == nil:
				expires, renewedAt = renewed.LeaseExpiresAt, now
			case errors.As(rerr, &refusal):
				return rerr
			}
		}
		level := slog.LevelDebug
		if try == 1 {
			level = slog.LevelWarn // once per outage, not once per attempt
		}
		log.Log(ctx, level, "outcome not recorded yet; retrying while the lease allows", "attempt", try, "lease_expires_at", expires, "err", err)
		if !w.pause(ctx, backoff) {
			return err
		}
		backoff = min(2*backoff, w.cfg.RecordBackoffMax)
		if !w.cfg.Clock.Now().Before(expires) {
			return fmt.Errorf("%w (at %s): %w", errLeaseExpired, expires.UTC().Format(time.RFC3339), err)
		}
	}
}

// retry runs f until it succeeds, fails with anything but a transient
// error, ctx ends (RecordTimeout), or maxTries attempts were made.
func (w *Worker) retry(ctx context.Context, f func() error) error {
	backoff := w.cfg.RecordBackoff
	for try := 1; ; try++ {
		err := f()
		if err == nil || !transient(err) || try >= w.maxTries() || ctx.Err() != nil || w.abandoned() || !w.pause(ctx, backoff) {
			return err
		}
		backoff = min(2*backoff, w.cfg.RecordBackoffMax)
	}
}

// maxTries bounds every recording loop whatever the clock says: each pause is
// at least RecordBackoff, and recording under a lease stops at its expiry, so
// no more attempts than this fit in one lease.
func (w *Worker) maxTries() int { return int(w.cfg.LeaseDuration/w.cfg.RecordBackoff) + 1 }

// pause waits d (by After) and reports false if ctx ended first.
func (w *Worker) pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-w.cfg.After(d):
		return true
	}
}

// escapedNote starts a recorded detail whose provider text had to be escaped
// or cut.
const escapedNote = "[provider text escaped] "

// sanitized makes what the provider said safe to record: the classified
// detail and reference may carry the provider's own text, and a control
// character in it must never cost a definite outcome (the ledger refuses
// such text). Both are escaped and cut as domain.EvidenceText does, and the
// detail then says so.
func sanitized(ctx context.Context, r domain.RefundResult, log *slog.Logger) domain.RefundResult {
	ref, refAltered := domain.EvidenceText(r.ProviderReference, domain.MaxProviderReferenceLength)
	detail, detailAltered := domain.EvidenceText(r.Detail, domain.MaxTextLength)
	if !refAltered && !detailAltered {
		return r
	}
	detail, _ = domain.EvidenceText(r.Detail, domain.MaxTextLength-len(escapedNote))
	log.WarnContext(ctx, "the provider's answer held text the ledger cannot store as is; recording it escaped",
		"reference_escaped", refAltered, "detail_escaped", detailAltered)
	r.ProviderReference, r.Detail = ref, escapedNote+detail
	return r
}
