package recovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
)

// ReconcilerConfig configures a Reconciler. Zero values take defaults.
type ReconcilerConfig struct {
	Ledger   *ledger.Handler // required
	Index    Index           // required
	Provider domain.Provider // required
	// Profile is what the provider documents (required, validated): the
	// reconciler decides from its capabilities (its reads, its key
	// retention), never from its name.
	Profile domain.ProviderProfile
	// Exports reads (and, where ExportProfile documents it safe, resends)
	// the export-delivery service's deliveries, for Unknown executions of
	// export downloads. Optional: without it such an execution is escalated
	// at once ("cannot tell"), never guessed.
	Exports domain.ExportDeliverer
	// ExportProfile is what the export-delivery service documents (required
	// and validated with Exports); the same capability rules apply.
	ExportProfile domain.ProviderProfile
	Clock         clock.Clock
	Logger        *slog.Logger
	// BatchSize bounds the executions examined per round (default 10, at
	// most setaside.MaxHeldBatch): with Interval it bounds the rate of
	// provider lookups.
	BatchSize int
	Interval  time.Duration // default 5s
	// ResendMargin is kept clear of the key retention: a resend is made only
	// while the execution started less than KeyRetention-ResendMargin ago
	// (default 1h).
	ResendMargin time.Duration
	// MaxInconclusive bounds how often one execution may come back
	// inconclusive (lookup failed, resend ambiguous, refund pending) before
	// it is escalated to a person (default 5).
	MaxInconclusive int
	// CallTimeout bounds each provider call (default 15s).
	CallTimeout time.Duration
	// SetAside keeps the executions whose reconciliation keeps failing (its
	// stream cannot be loaded, the outcome cannot be appended); default: a
	// setaside.Memory, with a warning logged. Serve passes the PostgreSQL
	// store. An inconclusive provider answer is not a failure: it is
	// bounded by MaxInconclusive.
	SetAside setaside.Store
	// Policy bounds the retries of a failing execution (zero fields:
	// setaside.DefaultPolicy).
	Policy setaside.Policy
	// OnItemFailure, when set, is called with every failure recorded (see
	// SweeperConfig.OnItemFailure).
	OnItemFailure func(setaside.Item)
	// OnRound, when set, is called as each round of Run begins: the context
	// it returns carries the round (serve's tracing span, the parent of the
	// round's provider reads and ledger commands), and the function it
	// returns is called with the round's steps and error (serve's
	// metrics). Both must be quick.
	OnRound func(ctx context.Context) (context.Context, func(steps []Step, err error))
	// Export, when set, reads the provider's export as audit provider-diff
	// reads it: the lost-effect check (lost_effects.go) checks its effects
	// against the ledger every ExportEvery (default DefaultExportEvery), and
	// at once after a log regression. Without it the check asks the
	// provider only about the operations a regression named.
	Export      func(ctx context.Context) (audit.ProviderExport, error)
	ExportEvery time.Duration
}

// Verdict names what one reconciliation step did.
type Verdict string

const (
	VerdictCompleted    Verdict = "completed"
	VerdictNotApplied   Verdict = "not-applied"
	VerdictEscalated    Verdict = "escalated"
	VerdictInconclusive Verdict = "inconclusive" // try again later
	VerdictSkipped      Verdict = "skipped"      // no longer Unknown
	// VerdictFailed: the step failed with an error that is not a refusal
	// (the stream cannot be loaded, the result cannot be appended); the
	// failure is recorded and the execution retried after a backoff, set
	// aside after Policy.MaxAttempts.
	VerdictFailed Verdict = "failed"
)

// Reconciler turns Unknown executions into facts, oldest first, at a bounded
// rate. It asks the executor of the operation's kind (the payment provider
// for a refund, the export-delivery service for an export download), and
// what it asks depends on what that executor's profile says it can answer:
//
//   - lookup by our reference (Profile.ReferenceField): the effects the
//     provider holds for the operation.
//     Found with this execution's key and applied: Completed; found with it
//     and not applied (none applied): NotApplied; in progress, or in a state
//     the adapter cannot name: inconclusive, asked again later; an effect
//     under another key applied: escalated (a second effect may exist; a
//     person must look), in progress under another key: inconclusive. Found
//     nothing: retrieve by key when the profile also has it (a search may
//     lag), else the resend rule.
//   - retrieve by idempotency key (Profile.RetrieveByKey), without a lookup:
//     the effect made under this execution's key. Applied: Completed; not
//     applied: NotApplied; in progress or unknown: inconclusive; none: the
//     resend rule.
//   - neither: escalated at once, "cannot tell". Nothing is sent.
//
// The resend rule: the original request is resent under the original key
// only where the profile documents that a resend cannot create a second
// effect (ProviderProfile.ResendIsSafe: inside the key retention, minus
// ResendMargin), and what that establishes is recorded; otherwise escalated.
// An answer that cannot tell (a read keeps failing, a resend is ambiguous)
// is escalated after MaxInconclusive rounds, never resent blindly. An
// effect whose amount, currency, export or operation disagrees with the
// operation is escalated.
//
// For a kind of bounded use, the effects of the operation's other uses are
// expected under their own keys: an effect under the key of another of the
// operation's executions is that execution's, not a second effect of this
// one; an effect under a key no execution of the operation has is (applied:
// escalated; in progress: inconclusive).
type Reconciler struct {
	cfg          ReconcilerConfig
	lost         *lostEffects
	items        *items
	walk         walker
	inconclusive map[domain.ExecutionID]int // bounded: entries leave on resolution, map reset past 10,000
}

// NewReconciler validates cfg.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	if cfg.Ledger == nil || cfg.Index == nil || cfg.Provider == nil {
		return nil, errors.New("reconciler: config: Ledger, Index and Provider are required")
	}
	if err := cfg.Profile.Validate(); err != nil {
		return nil, fmt.Errorf("reconciler: config: Profile: %w", err)
	}
	if cfg.Exports != nil {
		if err := cfg.ExportProfile.Validate(); err != nil {
			return nil, fmt.Errorf("reconciler: config: ExportProfile: %w", err)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = cfg.Ledger.Clock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 10)
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.ResendMargin = cmp.Or(cfg.ResendMargin, time.Hour)
	cfg.MaxInconclusive = cmp.Or(cfg.MaxInconclusive, 5)
	cfg.CallTimeout = cmp.Or(cfg.CallTimeout, 15*time.Second)
	cfg.ExportEvery = cmp.Or(cfg.ExportEvery, DefaultExportEvery)
	if cfg.BatchSize < 1 || cfg.BatchSize > setaside.MaxHeldBatch || cfg.Interval <= 0 || cfg.MaxInconclusive < 1 {
		return nil, fmt.Errorf("reconciler: config: BatchSize must be 1..%d, Interval and MaxInconclusive positive", setaside.MaxHeldBatch)
	}
	items, err := newItems(setaside.RoleReconciler, cfg.SetAside, cfg.Policy, cfg.Clock, cfg.Logger, cfg.OnItemFailure)
	if err != nil {
		return nil, err
	}
	r := &Reconciler{cfg: cfg, items: items, walk: walker{batch: cfg.BatchSize}, inconclusive: map[domain.ExecutionID]int{}}
	r.lost = newLostEffects(r)
	return r, nil
}

// Step is one execution's reconciliation.
type Step struct {
	Ref     ExecutionRef
	Verdict Verdict
	Detail  string
}

// ReconcileOnce examines up to BatchSize Unknown executions, oldest first,
// continuing the walk where the last round stopped (see walker). An
// execution whose step fails with an error that is not a refusal is
// recorded (VerdictFailed; retried after a backoff, set aside after
// Policy.MaxAttempts) and the round goes on; executions held so are not
// examined. It returns an error only for an outage: the index cannot be
// read, or the store is unreachable. It is not safe to call concurrently on
// one Reconciler (run one per process).
func (r *Reconciler) ReconcileOnce(ctx context.Context) ([]Step, error) {
	cands, end, err := r.walk.next(ctx, r.items, r.cfg.Index.UnknownExecutions)
	if err != nil {
		return nil, fmt.Errorf("reconcile: find unknown executions: %w", err)
	}
	var steps []Step
	handled, err := r.items.process(ctx, cands, func(ctx context.Context, ref ExecutionRef) error {
		v, detail, err := r.reconcile(ctx, ref)
		if err != nil {
			if !isOutage(ctx, err) {
				steps = append(steps, Step{Ref: ref, Verdict: VerdictFailed, Detail: err.Error()})
			}
			return fmt.Errorf("reconcile %s: %w", ref.ExecutionID, err)
		}
		steps = append(steps, Step{Ref: ref, Verdict: v, Detail: detail})
		r.cfg.Logger.InfoContext(ctx, "reconciled", "operation_id", ref.OperationID, "execution_id", ref.ExecutionID,
			"verdict", v, "detail", detail, "profile", r.cfg.Profile.Name)
		return nil
	})
	r.walk.commit(cands, handled, end)
	if err != nil {
		return steps, fmt.Errorf("reconcile: %w", err)
	}
	lost, err := r.lost.round(ctx)
	steps = append(steps, lost...)
	if err != nil {
		return steps, fmt.Errorf("reconcile: %w", err)
	}
	return steps, nil
}

// Run reconciles every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	return runEvery(ctx, r.cfg.Interval, func(ctx context.Context) {
		rctx, end := ctx, func([]Step, error) {}
		if r.cfg.OnRound != nil {
			rctx, end = r.cfg.OnRound(ctx)
		}
		steps, err := r.ReconcileOnce(rctx)
		end(steps, err)
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "reconcile round failed", "err", err)
		}
	})
}

func (r *Reconciler) reconcile(ctx context.Context, ref ExecutionRef) (Verdict, string, error) {
	state, err := r.cfg.Ledger.Load(ctx, ref.OperationID)
	if err != nil {
		return "", "", err
	}
	x := state.Execution(ref.ExecutionID)
	if x == nil || x.State != domain.ExecUnknown {
		delete(r.inconclusive, ref.ExecutionID)
		return VerdictSkipped, "no longer Unknown", nil
	}
	ex := r.executorOf(state)
	if ex == nil {
		return r.escalate(ctx, state, x, fmt.Sprintf("cannot tell: no executor of %s operations is configured to ask (no export-delivery service), and a resend is never made blind", state.Kind))
	}
	p := ex.profile
	switch {
	case p.LooksUpByReference():
		return r.byReference(ctx, ex, state, x)
	case p.RetrieveByKey:
		return r.byKey(ctx, ex, state, x)
	}
	return r.escalate(ctx, state, x, fmt.Sprintf("cannot tell: profile %s offers no read (no lookup by our reference, no retrieve by key), and a resend is never made blind", p.Name))
}

// executor is what the reconciler asks about one kind of operation: the
// reads, the resend and the profile of the service that executes it.
type executor struct {
	profile  domain.ProviderProfile
	noun     string // what one effect is called in evidence: "refund", "delivery"
	lookup   func(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error)
	retrieve func(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error)
	resend   func(ctx context.Context, state *domain.Operation, x *domain.Execution) domain.EffectResult
}

// executorOf returns the executor of state's kind, or nil when none is
// configured.
func (r *Reconciler) executorOf(state *domain.Operation) *executor {
	if state.Kind == domain.KindExportDownload {
		if r.cfg.Exports == nil {
			return nil
		}
		d := r.cfg.Exports
		return &executor{profile: r.cfg.ExportProfile, noun: "delivery", lookup: d.LookupByReference, retrieve: d.RetrieveByKey,
			resend: func(ctx context.Context, state *domain.Operation, x *domain.Execution) domain.EffectResult {
				return d.DeliverExport(ctx, domain.ExportDelivery{OperationID: state.ID, ExportID: state.ExportID, Use: x.Use, IdempotencyKey: x.IdempotencyKey})
			}}
	}
	p := r.cfg.Provider
	return &executor{profile: r.cfg.Profile, noun: "refund", lookup: p.LookupByReference, retrieve: p.RetrieveByKey,
		resend: func(ctx context.Context, state *domain.Operation, x *domain.Execution) domain.EffectResult {
			return p.CreateRefund(ctx, domain.RefundRequest{
				OperationID: state.ID, OrderID: state.OrderID, AmountMinor: state.AmountMinor, Currency: state.Currency,
				IdempotencyKey: x.IdempotencyKey,
			})
		}}
}

// otherUse reports whether key is the key of another execution of state
// than x, for a kind of bounded use (where every use has its own key and
// effect).
func otherUse(state *domain.Operation, x *domain.Execution, key domain.IdempotencyKey) bool {
	if !state.Policy.Repeats {
		return false
	}
	for _, o := range state.Executions {
		if o.ID != x.ID && o.IdempotencyKey == key {
			return true
		}
	}
	return false
}

// byReference asks the executor for the effects carrying our reference.
func (r *Reconciler) byReference(ctx context.Context, ex *executor, state *domain.Operation, x *domain.Execution) (Verdict, string, error) {
	lookupCtx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	effects, err := ex.lookup(lookupCtx, state.ID)
	cancel()
	if err != nil {
		return r.inconclusiveOrEscalate(ctx, state, x, "provider lookup failed: "+err.Error())
	}
	var applied, notApplied, unsettled []domain.ProviderEffect
	for _, e := range effects {
		if e.IdempotencyKey != x.IdempotencyKey {
			if otherUse(state, x, e.IdempotencyKey) {
				continue // another use's effect, under its own key
			}
			switch e.State {
			case domain.EffectApplied:
				return r.escalate(ctx, state, x, fmt.Sprintf("%s %s under another key %q took effect for this operation", ex.noun, e.Reference, e.IdempotencyKey))
			case domain.EffectInProgress, domain.EffectUnknown:
				return r.inconclusiveOrEscalate(ctx, state, x, fmt.Sprintf("%s %s under another key %q is %s at the provider (%s)", ex.noun, e.Reference, e.IdempotencyKey, e.State, e.Detail))
			}
			continue
		}
		if why := mismatch(ex, state, e); why != "" {
			return r.escalate(ctx, state, x, why)
		}
		switch e.State {
		case domain.EffectApplied:
			applied = append(applied, e)
		case domain.EffectNotApplied:
			notApplied = append(notApplied, e)
		default:
			unsettled = append(unsettled, e)
		}
	}
	switch {
	case len(applied) > 1:
		return r.escalate(ctx, state, x, fmt.Sprintf("%d %ss took effect under one key", len(applied), ex.noun))
	case len(applied) == 1:
		return r.resolve(ctx, state, x, domain.Completed, domain.MethodProviderLookup, applied[0].Reference, "found by operation id, succeeded")
	case len(unsettled) > 0:
		return r.inconclusiveOrEscalate(ctx, state, x, fmt.Sprintf("%s %s is %s at the provider (%s)", ex.noun, unsettled[0].Reference, unsettled[0].State, unsettled[0].Detail))
	case len(notApplied) > 0:
		return r.resolve(ctx, state, x, domain.NotApplied, domain.MethodProviderLookup, notApplied[0].Reference, "found by operation id, failed: "+notApplied[0].Detail)
	}
	if ex.profile.RetrieveByKey {
		return r.byKey(ctx, ex, state, x)
	}
	return r.notFound(ctx, ex, state, x, "not found by operation id")
}

// byKey asks the executor for the effect made under this execution's key.
func (r *Reconciler) byKey(ctx context.Context, ex *executor, state *domain.Operation, x *domain.Execution) (Verdict, string, error) {
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	e, found, err := ex.retrieve(callCtx, x.IdempotencyKey)
	cancel()
	if err != nil {
		return r.inconclusiveOrEscalate(ctx, state, x, "provider retrieve by key failed: "+err.Error())
	}
	if !found {
		return r.notFound(ctx, ex, state, x, "nothing under the key "+string(x.IdempotencyKey))
	}
	if e.IdempotencyKey != "" && e.IdempotencyKey != x.IdempotencyKey {
		return r.escalate(ctx, state, x, fmt.Sprintf("asked for key %q, the provider answered %s %s under key %q", x.IdempotencyKey, ex.noun, e.Reference, e.IdempotencyKey))
	}
	if why := mismatch(ex, state, e); why != "" {
		return r.escalate(ctx, state, x, why)
	}
	switch e.State {
	case domain.EffectApplied:
		return r.resolve(ctx, state, x, domain.Completed, domain.MethodProviderLookup, e.Reference, "retrieved by idempotency key, succeeded")
	case domain.EffectNotApplied:
		return r.resolve(ctx, state, x, domain.NotApplied, domain.MethodProviderLookup, e.Reference, "retrieved by idempotency key, failed: "+e.Detail)
	}
	return r.inconclusiveOrEscalate(ctx, state, x, fmt.Sprintf("%s %s under the key is %s at the provider (%s)", ex.noun, e.Reference, e.State, e.Detail))
}

// mismatch says why e cannot be this operation's effect: another operation,
// amount, currency or export than the ledger's. An answer that does not
// carry a field is not held against it.
func mismatch(ex *executor, state *domain.Operation, e domain.ProviderEffect) string {
	switch {
	case e.OperationID != "" && e.OperationID != state.ID:
		return fmt.Sprintf("%s %s under this execution's key belongs to operation %q at the provider", ex.noun, e.Reference, e.OperationID)
	case e.AmountMinor != 0 && e.AmountMinor != state.AmountMinor,
		e.Currency != "" && !strings.EqualFold(e.Currency, state.Currency):
		return fmt.Sprintf("%s %s under this execution's key is %d %s at the provider; the operation is %d %s",
			ex.noun, e.Reference, e.AmountMinor, e.Currency, state.AmountMinor, state.Currency)
	case e.ExportID != "" && e.ExportID != state.ExportID:
		return fmt.Sprintf("%s %s under this execution's key delivered export %q; the operation's is %q", ex.noun, e.Reference, e.ExportID, state.ExportID)
	}
	return ""
}

// notFound resends the original request under the original key only where
// the profile documents that a resend cannot create a second effect: while
// the executor still remembers the key (ProviderProfile.ResendIsSafe).
func (r *Reconciler) notFound(ctx context.Context, ex *executor, state *domain.Operation, x *domain.Execution, found string) (Verdict, string, error) {
	age := r.cfg.Clock.Now().Sub(x.StartedAt)
	if !ex.profile.ResendIsSafe(age, r.cfg.ResendMargin) {
		return r.escalate(ctx, state, x, fmt.Sprintf("%s, and the execution started %s ago: profile %s keeps keys %s, so the key may be pruned and a resend could take effect again",
			found, age.Round(time.Second), ex.profile.Name, ex.profile.KeyRetention))
	}
	callCtx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	res := ex.resend(callCtx, state, x)
	cancel()
	switch res.Outcome {
	case domain.Completed:
		return r.resolve(ctx, state, x, domain.Completed, domain.MethodProviderResend, res.ProviderReference, found+"; resent under the original key: "+res.Detail)
	case domain.NotApplied:
		return r.resolve(ctx, state, x, domain.NotApplied, domain.MethodProviderResend, res.ProviderReference, found+"; resent under the original key, rejected before execution: "+res.Detail)
	default:
		return r.inconclusiveOrEscalate(ctx, state, x, found+"; resend under the original key was ambiguous: "+res.Detail)
	}
}

// resolve records what the provider established. Texts that come from the
// provider are hostile: evidence is kept escaped and cut (EvidenceText); a
// provider reference the ledger refuses to record (control characters, too
// long) cannot be kept as a reference, so the execution is escalated with
// the reference, escaped, in the detail.
func (r *Reconciler) resolve(ctx context.Context, state *domain.Operation, x *domain.Execution, o domain.Outcome, m domain.ReconcileMethod, ref, evidence string) (Verdict, string, error) {
	evidence, _ = domain.EvidenceText(evidence, domain.MaxTextLength)
	err := r.cfg.Ledger.Reconcile(ctx, state.ID, domain.Reconcile{
		ExecutionID: x.ID, Outcome: o, Method: m, ProviderReference: ref, Actor: "reconciler", Evidence: evidence,
	}, ledger.Cause{Actor: "reconciler", CausationID: string(x.ID)})
	var refusal *domain.Refusal
	if errors.As(err, &refusal) && refusal.Reason == domain.ReasonCommandInvalid && refusal.Field == "provider_reference" {
		shown, _ := domain.EvidenceText(ref, 2*domain.MaxIDLength)
		return r.escalate(ctx, state, x, fmt.Sprintf("the provider established %s (%s) but its reference %q cannot be recorded: %s", o, evidence, shown, refusal.Detail))
	}
	if refusedBecauseResolved(err) {
		delete(r.inconclusive, x.ID)
		return VerdictSkipped, "resolved meanwhile", nil
	}
	if err != nil {
		return "", "", err
	}
	delete(r.inconclusive, x.ID)
	if o == domain.Completed {
		return VerdictCompleted, evidence, nil
	}
	return VerdictNotApplied, evidence, nil
}

func (r *Reconciler) inconclusiveOrEscalate(ctx context.Context, state *domain.Operation, x *domain.Execution, why string) (Verdict, string, error) {
	if len(r.inconclusive) > 10_000 {
		clear(r.inconclusive)
	}
	r.inconclusive[x.ID]++
	if r.inconclusive[x.ID] < r.cfg.MaxInconclusive {
		return VerdictInconclusive, why, nil
	}
	return r.escalate(ctx, state, x, fmt.Sprintf("inconclusive %d times: %s", r.inconclusive[x.ID], why))
}

// escalate hands x to a person. why may carry provider text: it is kept
// escaped and cut (EvidenceText), so hostile text can never make the
// escalation itself be refused.
func (r *Reconciler) escalate(ctx context.Context, state *domain.Operation, x *domain.Execution, why string) (Verdict, string, error) {
	why, _ = domain.EvidenceText(why, domain.MaxTextLength)
	err := r.cfg.Ledger.Escalate(ctx, state.ID, domain.Escalate{ExecutionID: x.ID, Reason: "reconciliation.cannot-tell", Detail: why},
		ledger.Cause{Actor: "reconciler", CausationID: string(x.ID)})
	if refusedBecauseResolved(err) {
		delete(r.inconclusive, x.ID)
		return VerdictSkipped, "resolved meanwhile", nil
	}
	if err != nil {
		return "", "", err
	}
	delete(r.inconclusive, x.ID)
	return VerdictEscalated, why, nil
}

func refusedBecauseResolved(err error) bool {
	var refusal *domain.Refusal
	return errors.As(err, &refusal) && (refusal.Reason == domain.ReasonExecutionNotUnknown || refusal.Reason == domain.ReasonExecutionAlreadyEscalated)
}
