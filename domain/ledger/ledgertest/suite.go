// Package ledgertest is the command handler's behaviour suite, run against
// every event store backend: the claim contract must hold in the shared
// store, not in a process, so each backend proves it with its own
// concurrency (separate pools for Postgres).
package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// Backend gives the suite isolated stores.
type Backend struct {
	// New returns a fresh, empty, isolated store, and a function opening
	// another store instance (its own connections) over the same data.
	New func(t *testing.T) (eventstore.Store, func() eventstore.Store)
	// Down returns a store over primary's data that cannot reach it, and a
	// function that makes it reachable again (nil if it cannot).
	Down func(t *testing.T, primary eventstore.Store) (eventstore.Store, func())
	// Shorten makes stream end at version keep (NoStreamVersion: no
	// events), dropping its later events, as a failover to a standby that
	// had not received them does: the suite drops only the latest events
	// of the log. Nil skips the tests of a log that went back (a server
	// the test cannot rewrite).
	Shorten func(t *testing.T, s eventstore.Store, stream string, keep int64)
	// Snapshots returns a snapshot store for the store New returned. Nil:
	// that store's own, when it implements eventstore.SnapshotStore (else
	// the handlers keep no snapshots).
	Snapshots func(t *testing.T, s eventstore.Store) eventstore.SnapshotStore
}

// Start is the suite's clock start: Thursday 14:02:10 UTC of the seed story.
var Start = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// Run runs the suite.
func Run(t *testing.T, b Backend) {
	t.Run("RacingClaimsOneWinner", func(t *testing.T) { t.Parallel(); racingClaims(t, b) })
	t.Run("SecondCapabilityWhileUnknown", func(t *testing.T) { t.Parallel(); secondCapabilityWhileUnknown(t, b) })
	t.Run("ExpiredAndConsumedAfterExpiry", func(t *testing.T) { t.Parallel(); expiry(t, b) })
	t.Run("StaleEpochAndLateOutcome", func(t *testing.T) { t.Parallel(); staleEpoch(t, b) })
	t.Run("DuplicateDeliveryLeavesExecuting", func(t *testing.T) { t.Parallel(); duplicateWhileLeased(t, b) })
	t.Run("NewAttemptAfterNotApplied", func(t *testing.T) { t.Parallel(); newAttempt(t, b) })
	t.Run("UnknownOperationIsEvidence", func(t *testing.T) { t.Parallel(); unknownOperation(t, b) })
	t.Run("StoreUnavailableNothingConsumed", func(t *testing.T) { t.Parallel(); unavailable(t, b) })
	t.Run("RefusedWriteIsRecorded", func(t *testing.T) { t.Parallel(); refusedWriteRecorded(t, b) })
	t.Run("LeaseBoundToHolder", func(t *testing.T) { t.Parallel(); leaseBoundToHolder(t, b) })
	t.Run("BoundedUsesRacingClaims", func(t *testing.T) { t.Parallel(); boundedUsesRacing(t, b) })
	t.Run("StaleCacheFenced", func(t *testing.T) { t.Parallel(); staleCacheFenced(t, b) })
	t.Run("StaleCacheRefusalRechecked", func(t *testing.T) { t.Parallel(); staleCacheRefusalRechecked(t, b) })
	t.Run("KindFromCache", func(t *testing.T) { t.Parallel(); kindFromCache(t, b) })
	t.Run("ShortenedStreamNoticed", func(t *testing.T) { t.Parallel(); shortenedStreamNoticed(t, b) })
	t.Run("ShortenedStreamConflict", func(t *testing.T) { t.Parallel(); shortenedStreamConflict(t, b) })
	t.Run("CreateAfterRollbackWrittenAgain", func(t *testing.T) { t.Parallel(); createAfterRollback(t, b) })
	t.Run("RewrittenStreamNoticed", func(t *testing.T) { t.Parallel(); rewrittenStreamNoticed(t, b) })
	t.Run("WorkerKeepsTheLostEffect", func(t *testing.T) { t.Parallel(); workerKeepsTheLostEffect(t, b) })
	t.Run("LostOperationIsEvidence", func(t *testing.T) { t.Parallel(); lostOperationIsEvidence(t, b) })
	t.Run("EvidenceOnALostClaim", func(t *testing.T) { t.Parallel(); evidenceOnALostClaim(t, b) })
	t.Run("DuplicateOfALostRefusal", func(t *testing.T) { t.Parallel(); duplicateOfALostRefusal(t, b) })
	t.Run("SummaryOfALostBound", func(t *testing.T) { t.Parallel(); summaryOfALostBound(t, b) })
	t.Run("LongEvidenceStreamStaysClaimable", func(t *testing.T) { t.Parallel(); longEvidenceStreamStaysClaimable(t, b) })
	t.Run("EvidenceConflictFoldsWhatFollows", func(t *testing.T) { t.Parallel(); evidenceConflictFoldsWhatFollows(t, b) })
	t.Run("StaleEvidenceSnapshotIgnored", func(t *testing.T) { t.Parallel(); staleEvidenceSnapshotIgnored(t, b) })
	t.Run("HostilePresentationsNeverDelayTheHolder", func(t *testing.T) { t.Parallel(); hostilePresentations(t, b) })
}

// SummaryEvery is the harness handlers' Config.SummaryEvery: short, so
// that a refusal past the bound waits little for its summary.
const SummaryEvery = 20 * time.Millisecond

// Harness is one operation's world: a store, a clock and a handler.
type Harness struct {
	T       *testing.T
	Store   eventstore.Store
	Another func() eventstore.Store
	Clock   *clock.Manual
	H       *ledger.Handler
	Op      domain.OperationID
	// Snapshots is what the harness's handlers keep snapshots in (nil:
	// none), whatever store each is given.
	Snapshots eventstore.SnapshotStore
	// Regressions are what the harness's handlers noticed.
	Regressions *RegressionLog
}

// RegressionLog keeps the regressions its observer is told of. Safe for
// concurrent use.
type RegressionLog struct {
	mu   sync.Mutex
	seen []eventstore.Regression
}

// ObserveRegression implements eventstore.RegressionObserver.
func (l *RegressionLog) ObserveRegression(_ context.Context, r eventstore.Regression) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r)
}

// Seen returns the regressions told so far.
func (l *RegressionLog) Seen() []eventstore.Regression {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]eventstore.Regression(nil), l.seen...)
}

// NewHarness builds a harness with one requested operation (120.00 EUR on an
// order of 200.00).
func NewHarness(t *testing.T, b Backend) *Harness {
	store, another := b.New(t)
	c := clock.NewManual(Start)
	h := &Harness{T: t, Store: store, Another: another, Clock: c, Op: "OP-4471", Regressions: &RegressionLog{}}
	if b.Snapshots != nil {
		h.Snapshots = b.Snapshots(t, store)
	} else {
		h.Snapshots, _ = store.(eventstore.SnapshotStore)
	}
	h.H = h.Handler(store)
	_, err := h.H.RequestOperation(context.Background(), domain.RequestOperation{
		OperationID: h.Op, OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: "COR-2210", RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	return h
}

// Handler returns a new handler over store sharing the harness clock.
func (h *Harness) Handler(store eventstore.Store) *ledger.Handler {
	return h.HandlerWith(store, nil)
}

// HandlerWith is Handler with its config changed by set (nil: as it is).
func (h *Harness) HandlerWith(store eventstore.Store, set func(*ledger.Config)) *ledger.Handler {
	cfg := ledger.Config{Store: store, Clock: h.Clock, AppendRetryBackoff: time.Millisecond, MaxConflictRetries: 64,
		Regressions: h.Regressions, SummaryEvery: SummaryEvery, Snapshots: h.Snapshots}
	if set != nil {
		set(&cfg)
	}
	hd, err := ledger.New(cfg)
	require.NoError(h.T, err)
	return hd
}

// Allow records an Allowed decision for the next attempt.
func (h *Harness) Allow(facts domain.Facts) domain.Decided {
	h.T.Helper()
	d, _, err := h.H.Decide(context.Background(), h.Op, domain.Decide{
		Approver: "agent-7", ApprovalLimitMinor: 50000, Facts: facts,
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(h.T, err)
	return d
}

// OKFacts are facts the policy allows.
var OKFacts = domain.Facts{OrderRefundable: true}

// Issue issues a capability under the latest decision.
func (h *Harness) Issue() domain.CapabilityID {
	h.T.Helper()
	c, err := h.H.IssueCapability(context.Background(), h.Op, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	require.NoError(h.T, err)
	return c.CapabilityID
}

// Claim presents capability c on message msg as worker.
func (h *Harness) Claim(hd *ledger.Handler, msg domain.MessageID, c domain.CapabilityID, worker string) ledger.ClaimOutcome {
	h.T.Helper()
	out, err := hd.Claim(context.Background(), h.Op, domain.Claim{MessageID: msg, CapabilityID: c, WorkerID: worker, CorrelationID: "COR-2210"})
	require.NoError(h.T, err)
	return out
}

// State reloads the operation from the store.
func (h *Harness) State() *domain.Operation {
	h.T.Helper()
	s, err := h.H.Load(context.Background(), h.Op)
	require.NoError(h.T, err)
	return s
}

// CountEvents counts the operation's events of type typ, in its stream and
// its evidence stream; a refusal counted by a RefusalsSummarized counts as
// one event of its type.
func (h *Harness) CountEvents(typ string) int {
	h.T.Helper()
	n := 0
	for _, stream := range []string{h.Op.StreamName(), domain.EvidenceStreamOf(h.Op)} {
		events, err := h.Store.ReadStream(context.Background(), stream, 0, 100_000)
		require.NoError(h.T, err)
		for _, e := range events {
			if e.Type == typ {
				n++
			}
			if e.Type == domain.TypeRefusalsSummarized {
				d, err := codec.DecodeRecorded(e)
				require.NoError(h.T, err)
				for _, r := range d.Event.(domain.RefusalsSummarized).Reasons {
					if r.Type == typ {
						n += int(r.Count)
					}
				}
			}
		}
	}
	return n
}

func racingClaims(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	// Two handler instances with separate stores (pools), 8 goroutines each.
	handlers := []*ledger.Handler{h.Handler(h.Another()), h.Handler(h.Another())}
	const n = 16
	results := make([]ledger.ClaimOutcome, n)
	errs := make([]error, n)
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			results[i], errs[i] = handlers[i%2].Claim(context.Background(), h.Op, domain.Claim{
				MessageID: domain.MessageID(fmt.Sprintf("MSG-%02d", i)), CapabilityID: capID, WorkerID: fmt.Sprintf("worker-%d", i),
			})
		}()
	}
	start.Done()
	done.Wait()
	claimed := 0
	for i := range n {
		require.NoError(t, errs[i])
		switch results[i].Status {
		case domain.StatusClaimed:
			claimed++
		case domain.StatusAlreadyConsumed, domain.StatusOperationNotExecutable:
		default:
			t.Fatalf("claim %d: unexpected %s (%s)", i, results[i].Status, results[i].Reason)
		}
	}
	require.Equal(t, 1, claimed, "exactly one claim wins")
	require.Equal(t, 1, h.CountEvents(domain.TypeClaimed), "the stream holds one Claimed")
	require.Equal(t, n-1, h.CountEvents(domain.TypePresentationRejected), "every loser is recorded")
	s := h.State()
	require.Len(t, s.Executions, 1)
	require.Equal(t, domain.CapConsumed, s.Capabilities[capID].State)
}

func secondCapabilityWhileUnknown(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	first := h.Issue()
	out := h.Claim(h.H, "MSG-55A", first, "worker-a")
	require.Equal(t, domain.StatusClaimed, out.Status)
	require.NoError(t, h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{
		ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: domain.Unknown, Detail: "timeout after send",
	}, ledger.Cause{Actor: "worker-a"}))

	second := h.Issue() // someone reissues authority instead of reconciling
	r := h.Claim(h.H, "MSG-56B", second, "worker-b")
	require.Equal(t, domain.StatusOperationNotExecutable, r.Status)
	require.Equal(t, domain.ReasonOperationOutcomeUnknown, r.Reason)
	require.False(t, r.ExecutionAttempted)
	s := h.State()
	require.Equal(t, domain.CapIssued, s.Capabilities[second].State, "the second capability stays unspent")
	require.Len(t, s.Executions, 1)
	require.Equal(t, domain.OpUnknown, s.Status())
}

func expiry(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	unused := h.Issue()
	used := h.Issue()
	require.Equal(t, domain.StatusClaimed, h.Claim(h.H, "MSG-1", used, "worker-a").Status)
	h.Clock.Advance(domain.DefaultCapabilityTTL + time.Second)

	r := h.Claim(h.H, "MSG-2", unused, "worker-b")
	require.Equal(t, domain.StatusExpired, r.Status)
	require.Equal(t, domain.ReasonCapabilityExpired, r.Reason)

	r = h.Claim(h.H, "MSG-3", used, "worker-b")
	require.Equal(t, domain.StatusAlreadyConsumed, r.Status, "consumed stays the fact that matters after expiry")
	require.True(t, r.ReplaySuspected)
}

func staleEpoch(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	out := h.Claim(h.H, "MSG-1", h.Issue(), "worker-a")
	exe, secret := out.ExecutionID, out.LeaseSecret
	h.Clock.Advance(domain.DefaultLeaseDuration)
	_, err := h.H.LapseLease(ctx, h.Op, domain.LapseLease{ExecutionID: exe}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)

	err = h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: exe, LeaseEpoch: 1, LeaseSecret: secret, Outcome: domain.Completed, ProviderReference: "re_1"}, ledger.Cause{})
	requireReason(t, err, domain.ReasonLeaseLost)
	_, err = h.H.RenewLease(ctx, h.Op, domain.RenewLease{ExecutionID: exe, LeaseEpoch: 1, LeaseSecret: secret, WorkerID: "worker-a"}, ledger.Cause{})
	requireReason(t, err, domain.ReasonLeaseLost)
	require.Equal(t, domain.ExecUnknown, h.State().Execution(exe).State)

	require.NoError(t, h.H.RecordLateOutcome(ctx, h.Op, domain.RecordLateOutcome{ExecutionID: exe, LeaseEpoch: 1, LeaseSecret: secret, Outcome: domain.Completed, ProviderReference: "re_1"}, ledger.Cause{}))
	require.Equal(t, domain.ExecCompleted, h.State().Execution(exe).State)
	err = h.H.RecordLateOutcome(ctx, h.Op, domain.RecordLateOutcome{ExecutionID: exe, LeaseEpoch: 1, LeaseSecret: secret, Outcome: domain.NotApplied}, ledger.Cause{})
	requireReason(t, err, domain.ReasonExecutionNotUnknown)
	require.Equal(t, domain.ExecCompleted, h.State().Execution(exe).State)
}

func duplicateWhileLeased(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	capID := h.Issue()
	out := h.Claim(h.H, "MSG-55A", capID, "worker-a")
	h.Clock.Advance(31 * time.Second) // the message lock lapsed; the execution lease did not
	dup := h.Claim(h.Handler(h.Another()), "MSG-55A", capID, "worker-b")
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Status)
	require.Equal(t, domain.ExecExecuting, dup.ExecutionState)
	s := h.State()
	require.Equal(t, domain.ExecExecuting, s.Execution(out.ExecutionID).State)
	require.Equal(t, int64(1), s.Execution(out.ExecutionID).LeaseEpoch)
	// worker A, fenced by nothing, renews and finishes: the duplicate's evidence
	// made its append conflict, it reloaded and its epoch still holds.
	_, err := h.H.RenewLease(ctx, h.Op, domain.RenewLease{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, WorkerID: "worker-a"}, ledger.Cause{})
	require.NoError(t, err)
	require.NoError(t, h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_1"}, ledger.Cause{}))
	require.Equal(t, domain.OpCompleted, h.State().Status())
	require.Equal(t, 1, h.CountEvents(domain.TypeDeliveryDuplicated))
}

func newAttempt(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	first := h.Issue()
	out := h.Claim(h.H, "MSG-1", first, "worker-a")
	require.NoError(t, h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret, Outcome: domain.NotApplied, Detail: "validation"}, ledger.Cause{}))

	// Same capability again: spent. No new capability without a new decision.
	require.Equal(t, domain.StatusAlreadyConsumed, h.Claim(h.H, "MSG-2", first, "worker-a").Status)
	_, err := h.H.IssueCapability(ctx, h.Op, domain.IssueCapability{}, ledger.Cause{})
	requireReason(t, err, domain.ReasonDecisionNotAllowed)

	// Facts changed against it: Denied, and no capability can be issued.
	d, _, err := h.H.Decide(ctx, h.Op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50000,
		Facts: domain.Facts{OrderRefundable: true, ChargebackOpen: true}}, ledger.Cause{})
	require.NoError(t, err)
	require.Equal(t, domain.Denied, d.Verdict)
	require.Equal(t, 2, d.Attempt)
	_, err = h.H.IssueCapability(ctx, h.Op, domain.IssueCapability{}, ledger.Cause{})
	requireReason(t, err, domain.ReasonDecisionNotAllowed)
	require.Equal(t, 1, h.CountEvents(domain.TypeCapabilityIssued))

	// A current Allowed decision and new authority open attempt 2.
	d = h.Allow(OKFacts)
	require.Equal(t, 2, d.Attempt)
	second := h.Issue()
	r := h.Claim(h.H, "MSG-3", second, "worker-a")
	require.Equal(t, domain.StatusClaimed, r.Status)
	require.Equal(t, domain.IdempotencyKey("refund-OP-4471-a2"), r.Claimed.IdempotencyKey)
	s := h.State()
	require.Equal(t, domain.CapConsumed, s.Capabilities[first].State, "spent authority is never reset")
	require.Len(t, s.Executions, 2)
}

func unknownOperation(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	out, err := h.H.Claim(context.Background(), "OP-NOPE", domain.Claim{MessageID: "MSG-X", CapabilityID: "CAP-X", WorkerID: "w"})
	require.NoError(t, err)
	require.Equal(t, domain.StatusInvalid, out.Status)
	require.Equal(t, domain.ReasonOperationUnknown, out.Reason)
	ev, err := h.Store.ReadStream(context.Background(), domain.UnattributedStreamFor(h.Clock.Now()), 0, 10)
	require.NoError(t, err)
	require.Len(t, ev, 1)
	require.Equal(t, domain.TypePresentationRejected, ev[0].Type)
	require.Contains(t, string(ev[0].Data), `"MSG-X"`)
	empty, err := h.Store.ReadStream(context.Background(), domain.OperationID("OP-NOPE").StreamName(), 0, 10)
	require.NoError(t, err)
	require.Empty(t, empty, "no stream is created for an unknown operation")
}

func unavailable(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	down, restore := b.Down(t, h.Store)
	hd := h.Handler(down)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := hd.Claim(ctx, h.Op, domain.Claim{MessageID: "MSG-1", CapabilityID: capID, WorkerID: "worker-a"})
	require.ErrorIs(t, err, eventstore.ErrUnavailable)
	if restore != nil {
		restore()
	}
	s := h.State()
	require.Equal(t, domain.CapIssued, s.Capabilities[capID].State, "nothing is recorded as consumed")
	require.Empty(t, s.Executions)
}

func refusedWriteRecorded(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	out := h.Claim(h.H, "MSG-1", h.Issue(), "worker-a")
	err := h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 7, LeaseSecret: out.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_9"}, ledger.Cause{})
	requireReason(t, err, domain.ReasonLeaseLost)
	require.Equal(t, 1, h.CountEvents(domain.TypeWriteRefused))
	require.Equal(t, domain.ExecExecuting, h.State().Execution(out.ExecutionID).State)

	// Hostile text is refused naming its field, and still recorded, escaped.
	err = h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret,
		Outcome: domain.Completed, ProviderReference: "re_\x00", Detail: "bad\x00text"}, ledger.Cause{Actor: "worker-a"})
	requireReason(t, err, domain.ReasonCommandInvalid)
	var refusal *domain.Refusal
	require.ErrorAs(t, err, &refusal)
	require.Equal(t, "provider_reference", refusal.Field)
	refused := h.WriteRefusals()
	require.Len(t, refused, 2)
	last := refused[1]
	require.Equal(t, `re_\x00`, last.ProviderReference)
	require.Equal(t, `bad\x00text`, last.Detail)
	require.Equal(t, []string{"provider_reference", "detail"}, last.Escaped)
	require.Equal(t, domain.SecretHeld, last.SecretCheck)
	require.Equal(t, domain.ExecExecuting, h.State().Execution(out.ExecutionID).State)
}

// leaseBoundToHolder: a second claimer that knows the execution id and its
// epoch (anyone can read both) holds nothing: its renewal, outcome and late
// outcome are refused lease.not-held and recorded; the holder still writes.
func leaseBoundToHolder(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	h.Allow(OKFacts)
	a := h.Claim(h.H, "MSG-1", h.Issue(), "worker-a")
	require.Len(t, a.LeaseSecret, 43, "32 random bytes, base64url without padding")
	require.Equal(t, domain.LeaseSecretDigest(a.LeaseSecret), a.Claimed.LeaseSecretDigest)
	require.Equal(t, domain.LeaseSecretDigest(a.LeaseSecret), h.State().Execution(a.ExecutionID).HeldLeases[0].SecretDigest)
	dup := h.Claim(h.H, "MSG-1", a.Claimed.CapabilityID, "worker-b")
	require.Equal(t, domain.StatusDuplicateDelivery, dup.Status)
	require.Empty(t, dup.LeaseSecret, "only a claim that opens an execution hands out a secret")

	x := a.ExecutionID
	for _, secret := range []string{"", "guessed-secret", dup.LeaseSecret} {
		_, err := h.H.RenewLease(ctx, h.Op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: secret, WorkerID: "worker-a"}, ledger.Cause{Actor: "worker-b"})
		requireReason(t, err, domain.ReasonLeaseNotHeld)
		err = h.H.RecordOutcome(ctx, h.Op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: secret, Outcome: domain.NotApplied}, ledger.Cause{Actor: "worker-b"})
		requireReason(t, err, domain.ReasonLeaseNotHeld)
	}
	require.Equal(t, domain.ExecExecuting, h.State().Execution(x).State)
	require.Len(t, h.WriteRefusals(), 6)

	h.Clock.Advance(domain.DefaultLeaseDuration)
	_, err := h.H.LapseLease(ctx, h.Op, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(t, err)
	err = h.H.RecordLateOutcome(ctx, h.Op, domain.RecordLateOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: "guessed-secret", Outcome: domain.NotApplied}, ledger.Cause{Actor: "worker-b"})
	requireReason(t, err, domain.ReasonLeaseNotHeld)
	require.Equal(t, domain.ExecUnknown, h.State().Execution(x).State)
	refused := h.WriteRefusals()
	require.Len(t, refused, 7)
	require.Equal(t, domain.SecretWrong, refused[6].SecretCheck)
	require.Equal(t, domain.CommandRecordLateOutcome, refused[6].Command)

	require.NoError(t, h.H.RecordLateOutcome(ctx, h.Op, domain.RecordLateOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: a.LeaseSecret, Outcome: domain.Completed, ProviderReference: "re_1"}, ledger.Cause{Actor: "worker-a"}))
	require.Equal(t, domain.ExecCompleted, h.State().Execution(x).State)
}

// WriteRefusals decodes the operation stream's WriteRefused events.
func (h *Harness) WriteRefusals() []domain.WriteRefused {
	h.T.Helper()
	events, err := h.Store.ReadStream(context.Background(), domain.EvidenceStreamOf(h.Op), 0, 100_000)
	require.NoError(h.T, err)
	var out []domain.WriteRefused
	for _, rec := range events {
		if rec.Type != domain.TypeWriteRefused {
			continue
		}
		dec, err := codec.DecodeRecorded(rec)
		require.NoError(h.T, err)
		e := dec.Event
		out = append(out, e.(domain.WriteRefused))
	}
	return out
}

func requireReason(t *testing.T, err error, reason domain.Reason) {
	t.Helper()
	var r *domain.Refusal
	require.True(t, errors.As(err, &r), "want refusal %s, got %v", reason, err)
	require.Equal(t, reason, r.Reason, r.Detail)
}

// boundedUsesRacing: an export download of three uses, presented by 16
// racing claims per round from two handler instances: each round exactly
// one claim opens an execution (one open at a time), each with its use and
// its own key; once the three uses are spent, every presentation is
// AlreadyConsumed with replay suspected, and the stream holds three
// Claimed, each recorded loser as evidence.
func boundedUsesRacing(t *testing.T, b Backend) {
	h := NewHarness(t, b)
	ctx := context.Background()
	op := domain.OperationID("OP-5120")
	_, err := h.H.RequestOperation(ctx, domain.RequestOperation{OperationID: op, Kind: domain.KindExportDownload, ExportID: "EXP-7781",
		CorrelationID: "COR-5120"}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	_, issued, err := h.H.DecideAndIssue(ctx, op, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: 3},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	require.NoError(t, err)
	handlers := []*ledger.Handler{h.Handler(h.Another()), h.Handler(h.Another())}
	const n = 16
	keys := map[domain.IdempotencyKey]bool{}
	for round := 1; round <= 4; round++ {
		results := make([]ledger.ClaimOutcome, n)
		errs := make([]error, n)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range n {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				results[i], errs[i] = handlers[i%2].Claim(ctx, op, domain.Claim{
					MessageID: domain.MessageID(fmt.Sprintf("MSG-%d-%02d", round, i)), CapabilityID: issued.CapabilityID, WorkerID: fmt.Sprintf("worker-%d", i),
				})
			}()
		}
		start.Done()
		done.Wait()
		var won []ledger.ClaimOutcome
		for i := range n {
			require.NoError(t, errs[i])
			switch results[i].Status {
			case domain.StatusClaimed:
				won = append(won, results[i])
			case domain.StatusOperationNotExecutable:
				require.Less(t, round, 4, "spent authority is AlreadyConsumed, not refused for an open execution")
			case domain.StatusAlreadyConsumed:
				require.True(t, results[i].ReplaySuspected)
			default:
				t.Fatalf("round %d claim %d: unexpected %s (%s)", round, i, results[i].Status, results[i].Reason)
			}
		}
		if round == 4 {
			require.Empty(t, won, "three uses, no fourth claim")
			break
		}
		require.Len(t, won, 1, "round %d: one execution open at a time", round)
		c := won[0]
		require.Equal(t, round, c.Use)
		require.Equal(t, 3-round, c.UsesLeft)
		require.False(t, keys[c.Claimed.IdempotencyKey], "every use has its own key")
		keys[c.Claimed.IdempotencyKey] = true
		require.NoError(t, h.H.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: c.ExecutionID, LeaseEpoch: 1, LeaseSecret: c.LeaseSecret,
			Outcome: domain.Completed, ProviderReference: fmt.Sprintf("dl_%d", round)}, ledger.Cause{Actor: "worker"}))
	}
	s, err := h.H.Load(ctx, op)
	require.NoError(t, err)
	require.Len(t, s.Executions, 3)
	require.Equal(t, domain.CapConsumed, s.Capabilities[issued.CapabilityID].State)
	oh := *h
	oh.Op = op
	require.Equal(t, 3, oh.CountEvents(domain.TypeClaimed))
	require.Equal(t, 4*n-3, oh.CountEvents(domain.TypePresentationRejected), "every loser recorded, one by one or counted")
}
