package recovery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// VerdictLostEffect: the step escalated an effect the executor holds that
// no execution of the ledger accounts for (the store lost it).
const VerdictLostEffect Verdict = "lost-effect"

// Bounds of the lost-effect check.
const (
	// maxLostCandidates bounds the operations waiting to be asked about
	// (named by log regressions); beyond, a regression's operation is
	// counted and logged, and the export scan is what finds its effects.
	maxLostCandidates = 10_000
	// maxLostAttempts bounds how often one operation's read may fail
	// before it is dropped (logged: check it by hand, audit provider-diff).
	maxLostAttempts = 10
	// maxVerified bounds the effects of the export remembered as accounted
	// for; when full it is cleared and they are checked again.
	maxVerified = 100_000
	// exportChecksPerRound bounds the export's effects checked against the
	// ledger in one round (each a stream read); the next round goes on.
	exportChecksPerRound = 500
	// regressionPage is how many events of the regression stream one read
	// takes.
	regressionPage = 500
)

// DefaultExportEvery is how often the lost-effect check reads the
// executor's export when nothing else prompts it (ReconcilerConfig.
// ExportEvery): a regression read makes the next round read it at once.
const DefaultExportEvery = 5 * time.Minute

// lostEffects is the reconciler's search for effects the ledger lost. A
// store that failed over to a standby without its last commits loses
// claims whose refunds the provider made; no lease lapses for a claim
// that is gone, so no reconciliation asks about it. The check asks:
//
//   - after a log regression: every LogRegressed of an operation's stream
//     names the operation and the executions the cache knew; the executor
//     is asked for the operation's effects (by our reference, or by each
//     key the cache knew) with the reads reconciliation has;
//   - on a schedule, cheaply: when Config.Export is set, the executor's
//     export (as audit provider-diff reads it) is read and each effect not
//     yet seen accounted for is checked against its operation's stream,
//     at most exportChecksPerRound per round; after a regression every
//     effect is checked again.
//
// An applied effect (or one in progress, or whose state the executor
// cannot name) that no execution accounts for is escalated to a person
// (ledger.EscalateLostEffect): never left silent. Not safe for concurrent
// use (the reconciler's round runs it).
type lostEffects struct {
	r *Reconciler
	// cursor over domain.RegressionStream: the last event read.
	version int64
	anchor  string
	// pending are the operations a regression named, with the keys the
	// cache knew and how often reading them failed.
	pending map[domain.OperationID]*lostCandidate
	order   []domain.OperationID // pending's order, oldest first
	dropped int64                // candidates beyond maxLostCandidates
	// verified are export effects found accounted for (by reference).
	verified map[string]bool
	// escalated are the effects this check escalated (by reference), kept
	// across regressions: an operation the store lost has no stream to
	// show the escalation, so without it each regression and each export
	// read would escalate the same effect again. At most maxVerified;
	// another process (or this one after a restart) may escalate one again.
	escalated  map[string]bool
	exportNext time.Time // when the export is read next (zero: at once)
	exportAt   int       // the export's records checked so far in this read
}

type lostCandidate struct {
	keys     map[domain.IdempotencyKey]bool
	attempts int
	// openRounds counts the rounds an execution still open under an
	// effect's key accounted for it (errStillOpen).
	openRounds int
}

// errStillOpen: an effect of the operation is accounted for only by an
// execution still open under its key. That execution may yet complete with
// another effect (past the executor's key retention the key makes a new
// one) or end NotApplied, so the operation is asked about again next
// round, at most maxOpenRounds times.
var errStillOpen = errors.New("an effect is accounted for by an open execution only")

// maxOpenRounds bounds the rounds one operation is asked about again while
// an open execution accounts for its effect (errStillOpen).
const maxOpenRounds = 1000

func newLostEffects(r *Reconciler) *lostEffects {
	return &lostEffects{r: r, version: eventstore.NoStreamVersion, pending: map[domain.OperationID]*lostCandidate{},
		verified: map[string]bool{}, escalated: map[string]bool{}}
}

// round reads the regressions recorded since the last round, asks about
// up to BatchSize of the operations they named, and checks part of the
// executor's export when it is due. It returns the escalations as steps,
// and an error only for an outage (the store or the regression stream
// cannot be read).
func (l *lostEffects) round(ctx context.Context) ([]Step, error) {
	if err := l.readRegressions(ctx); err != nil {
		return nil, err
	}
	var steps []Step
	var later []domain.OperationID // asked again next round
	defer func() { l.order = append(l.order, later...) }()
	for i := 0; i < l.r.cfg.BatchSize && len(l.order) > 0; i++ {
		op := l.order[0]
		l.order = l.order[1:]
		c := l.pending[op]
		s, err := l.askAbout(ctx, op, c)
		steps = append(steps, s...)
		if errors.Is(err, errStillOpen) {
			if c.openRounds++; c.openRounds < maxOpenRounds {
				later = append(later, op)
				continue
			}
			l.r.cfg.Logger.ErrorContext(ctx, "lost-effect check: an execution still open accounts for an effect a log regression's operation holds, round after round; check it by hand (audit provider-diff)",
				"operation_id", op, "rounds", c.openRounds)
			err = nil
		}
		if err != nil {
			if isOutage(ctx, err) {
				l.order = append(l.order, op)
				return steps, err
			}
			c.attempts++
			if c.attempts < maxLostAttempts {
				l.order = append(l.order, op)
				continue
			}
			l.r.cfg.Logger.ErrorContext(ctx, "lost-effect check: cannot ask the executor about an operation a log regression named; check it by hand (audit provider-diff)",
				"operation_id", op, "attempts", c.attempts, "err", err)
		}
		delete(l.pending, op)
	}
	s, err := l.scanExport(ctx)
	return append(steps, s...), err
}

// readRegressions reads the regression stream after the last event read
// (from that event: a stream that no longer holds it went back, and is
// read again from its start) and queues the operations its LogRegressed
// events name. A regression read also makes the export due at once, every
// effect of it checked again.
func (l *lostEffects) readRegressions(ctx context.Context) error {
	store := l.r.cfg.Ledger.Store()
	for pages := 0; pages < maxPages; pages++ {
		from, anchored := l.version+1, l.anchor != ""
		if anchored {
			from--
		}
		page, err := store.ReadStream(ctx, domain.RegressionStream, from, regressionPage)
		if err != nil {
			return fmt.Errorf("lost-effect check: read %s: %w", domain.RegressionStream, err)
		}
		full := len(page) == regressionPage
		if anchored {
			if len(page) == 0 || page[0].Version != l.version || page[0].ID != l.anchor {
				l.version, l.anchor = eventstore.NoStreamVersion, "" // it went back too: read it all again
				continue
			}
			page = page[1:]
		}
		for i := range page {
			l.version, l.anchor = page[i].Version, page[i].ID
			d, err := codec.DecodeRecorded(page[i])
			if err != nil {
				return fmt.Errorf("lost-effect check: %s@%d: %w", domain.RegressionStream, page[i].Version, err)
			}
			if ev, ok := d.Event.(domain.LogRegressed); ok {
				l.regressed(ctx, ev)
			}
		}
		if !full {
			return nil
		}
	}
	return fmt.Errorf("lost-effect check: %s longer than %d pages", domain.RegressionStream, maxPages)
}

// maxPages bounds one read of the regression stream (its recorders bound
// it far below).
const maxPages = 10_000

// regressed queues the operation a regression names and makes the export
// due again, every effect of it to be checked again.
func (l *lostEffects) regressed(ctx context.Context, ev domain.LogRegressed) {
	clear(l.verified)
	l.exportNext, l.exportAt = time.Time{}, 0
	op, _, ok := domain.OperationOfStream(ev.Stream)
	if !ok {
		return // the global log went back: the export scan covers it
	}
	c := l.pending[op]
	if c == nil {
		if len(l.pending) >= maxLostCandidates {
			l.dropped++
			l.r.cfg.Logger.WarnContext(ctx, "lost-effect check: too many operations waiting to be asked about; the export scan must find this one's effects",
				"operation_id", op, "dropped", l.dropped)
			return
		}
		c = &lostCandidate{keys: map[domain.IdempotencyKey]bool{}}
		l.pending[op] = c
		l.order = append(l.order, op)
	}
	for _, x := range ev.SeenExecutions {
		c.keys[x.IdempotencyKey] = true
	}
}

// askAbout asks the executor for op's effects and escalates those no
// execution accounts for.
func (l *lostEffects) askAbout(ctx context.Context, op domain.OperationID, c *lostCandidate) ([]Step, error) {
	state, err := l.r.cfg.Ledger.Load(ctx, op)
	if err != nil {
		return nil, err
	}
	ex := l.executorFor(state, c)
	if ex == nil {
		l.r.cfg.Logger.ErrorContext(ctx, "lost-effect check: no executor is configured to ask about an operation a log regression named; check it by hand (audit provider-diff)",
			"operation_id", op)
		return nil, nil
	}
	var effects []domain.ProviderEffect
	switch {
	case ex.profile.LooksUpByReference():
		lctx, cancel := context.WithTimeout(ctx, l.r.cfg.CallTimeout)
		effects, err = ex.lookup(lctx, op)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", op, err)
		}
	case ex.profile.RetrieveByKey:
		for _, key := range keysToAsk(state, c) {
			rctx, cancel := context.WithTimeout(ctx, l.r.cfg.CallTimeout)
			e, found, err := ex.retrieve(rctx, key)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("retrieve %s: %w", key, err)
			}
			if found {
				effects = append(effects, e)
			}
		}
	default:
		l.r.cfg.Logger.ErrorContext(ctx, "lost-effect check: the executor offers no read; check the operation a log regression named by hand (audit provider-diff)",
			"operation_id", op, "profile", ex.profile.Name)
		return nil, nil
	}
	var steps []Step
	open := false
	for _, e := range effects {
		s, err := l.escalate(ctx, op, e, domain.LostEffectByLookup)
		if err != nil {
			return steps, err
		}
		steps = append(steps, s...)
		if len(s) == 0 && moved(e.State) && !l.settled(ctx, op, e.Reference, e.IdempotencyKey) {
			open = true
		}
	}
	if open {
		return steps, errStillOpen
	}
	return steps, nil
}

// moved reports whether an effect in state st made (or may have made)
// something: what the check escalates when nothing accounts for it.
func moved(st domain.EffectState) bool {
	return st == domain.EffectApplied || st == domain.EffectInProgress || st == domain.EffectUnknown
}

// keysToAsk are the keys to retrieve for an operation: those the cache
// knew, and those of the operation's executions and decisions.
func keysToAsk(state *domain.Operation, c *lostCandidate) []domain.IdempotencyKey {
	seen := map[domain.IdempotencyKey]bool{}
	var keys []domain.IdempotencyKey
	add := func(k domain.IdempotencyKey) {
		if k != "" && !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for k := range c.keys {
		add(k)
	}
	for _, x := range state.Executions {
		add(x.IdempotencyKey)
	}
	for _, d := range state.Decisions {
		if !state.Policy.Repeats {
			add(d.IdempotencyKey)
		}
	}
	return keys
}

// executorFor is the executor of state's kind; for an operation the store
// no longer holds, the kind the keys the cache knew name.
func (l *lostEffects) executorFor(state *domain.Operation, c *lostCandidate) *executor {
	if !state.Exists() {
		state = &domain.Operation{ID: state.ID, Kind: domain.KindRefund}
		for k := range c.keys {
			if strings.HasPrefix(string(k), "export-") {
				state.Kind = domain.KindExportDownload
			}
		}
	}
	return l.r.executorOf(state)
}

// escalate records e when no execution of op accounts for it.
func (l *lostEffects) escalate(ctx context.Context, op domain.OperationID, e domain.ProviderEffect, source string) ([]Step, error) {
	var outcome domain.Outcome
	switch e.State {
	case domain.EffectApplied:
		outcome = domain.Completed
	case domain.EffectInProgress, domain.EffectUnknown:
		outcome = domain.Unknown
	default:
		return nil, nil // nothing moved
	}
	if e.Reference != "" && l.escalated[e.Reference] {
		return nil, nil
	}
	escalated, err := l.r.cfg.Ledger.EscalateLostEffect(ctx, op, domain.EscalateLostEffect{
		IdempotencyKey: e.IdempotencyKey, ProviderReference: e.Reference, Outcome: outcome, AmountMinor: e.AmountMinor,
		Currency: e.Currency, ExportID: e.ExportID, Source: source, Detail: e.Detail,
	}, ledger.Cause{Actor: "reconciler", CausationID: e.Reference})
	if err != nil || !escalated {
		return nil, err
	}
	if e.Reference != "" {
		if len(l.escalated) >= maxVerified {
			clear(l.escalated)
		}
		l.escalated[e.Reference] = true
	}
	detail := fmt.Sprintf("the executor holds %s under key %s (%s) that no execution the store holds accounts for: escalated", e.Reference, e.IdempotencyKey, e.State)
	l.r.cfg.Logger.ErrorContext(ctx, "LOST EFFECT: an effect no execution of the ledger accounts for (the store lost it); escalated to a person",
		"operation_id", op, "provider_reference", e.Reference, "idempotency_key", e.IdempotencyKey, "state", e.State, "source", source)
	return []Step{{Ref: ExecutionRef{OperationID: op}, Verdict: VerdictLostEffect, Detail: detail}}, nil
}

// scanExport checks the executor's export, when configured and due, at
// most exportChecksPerRound effects per round.
func (l *lostEffects) scanExport(ctx context.Context) ([]Step, error) {
	cfg := l.r.cfg
	if cfg.Export == nil || cfg.Clock.Now().Before(l.exportNext) {
		return nil, nil
	}
	export, err := cfg.Export(ctx)
	if err != nil {
		return nil, fmt.Errorf("lost-effect check: read the executor's export: %w", err)
	}
	var (
		steps   []Step
		checked int
		line    int
		stop    = errors.New("enough for this round")
	)
	err = export.Records(func(rec audit.ProviderRecord) error {
		line++
		if line <= l.exportAt {
			return nil // checked in an earlier round of this read
		}
		if checked >= exportChecksPerRound {
			return stop
		}
		l.exportAt = line
		if rec.State != domain.EffectApplied && rec.State != domain.EffectInProgress && rec.State != domain.EffectUnknown || l.verified[rec.Reference] {
			return nil
		}
		checked++
		op := domain.OperationID(rec.OperationID)
		if op == "" {
			op = operationOfKey(rec.IdempotencyKey)
		}
		if op == "" {
			cfg.Logger.WarnContext(ctx, "lost-effect check: an effect of the export names no operation; check it by hand", "reference", rec.Reference, "line", rec.Line)
			return nil
		}
		s, err := l.escalate(ctx, op, domain.ProviderEffect{Reference: rec.Reference, OperationID: op, IdempotencyKey: domain.IdempotencyKey(rec.IdempotencyKey),
			State: rec.State, AmountMinor: rec.AmountMinor, Currency: rec.Currency, Detail: rec.Status}, domain.LostEffectByExport)
		if err != nil {
			l.exportAt = line - 1 // not checked: the next round checks it first
			return err
		}
		steps = append(steps, s...)
		if len(s) == 0 && !l.settled(ctx, op, rec.Reference, domain.IdempotencyKey(rec.IdempotencyKey)) {
			return nil // an open execution under its key: checked again at the next read
		}
		if len(l.verified) >= maxVerified {
			clear(l.verified)
		}
		l.verified[rec.Reference] = true // accounted for now
		return nil
	})
	switch {
	case errors.Is(err, stop):
		return steps, nil // the next round goes on from exportAt
	case err != nil:
		return steps, fmt.Errorf("lost-effect check: %w", err)
	}
	l.exportNext, l.exportAt = cfg.Clock.Now().Add(cfg.ExportEvery), 0
	return steps, nil
}

// settled reports whether an execution of op settled with the effect of
// reference ref under key (or this check escalated it):
// one that recorded its reference, or one under its key completed without
// a reference. An execution under its key that is still open accounts for
// the effect only while it is: past the executor's key retention the same
// key makes a new effect, and the execution may complete with that one.
func (l *lostEffects) settled(ctx context.Context, op domain.OperationID, ref string, key domain.IdempotencyKey) bool {
	if l.escalated[ref] {
		return true // escalated by this check (its operation may be gone)
	}
	state, err := l.r.cfg.Ledger.Load(ctx, op)
	if err != nil {
		return false
	}
	for _, x := range state.Executions {
		if ref != "" && x.ProviderReference == ref ||
			x.IdempotencyKey == key && x.State == domain.ExecCompleted && x.ProviderReference == "" {
			return true
		}
	}
	return false
}

// operationOfKey reads the operation a derived key names
// (refund-OP-…-a1, export-OP-…-a1-u2), "" when it names none.
func operationOfKey(key string) domain.OperationID {
	i := strings.Index(key, domain.PrefixOperation)
	if i < 0 {
		return ""
	}
	rest := key[i:]
	j := strings.LastIndex(rest, "-a")
	if j < 0 {
		return ""
	}
	return domain.OperationID(rest[:j])
}
