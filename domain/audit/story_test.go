package audit_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// The operations of the story, and what each one exercises.
const (
	opThursday  domain.OperationID = "OP-4471" // the seed: claim, lost response, duplicate, lapse, reconciliation, Friday replay
	opHappy     domain.OperationID = "OP-5001" // claim, renew, Completed
	opRetried   domain.OperationID = "OP-5002" // NotApplied, replay refused, Denied on changed facts, attempt 2 Completed
	opOpen      domain.OperationID = "OP-5003" // the executor's own Unknown, authority reissued and refused, lookups inconclusive: still open
	opEscalated domain.OperationID = "OP-5004" // Unknown, a refund under another key: escalated
	opLate      domain.OperationID = "OP-5005" // lapse, then the stale executor's late Completed
	opRefused   domain.OperationID = "OP-5006" // revoked, expired, barrier refusal; left Executing
)

var storyOperations = []domain.OperationID{opThursday, opHappy, opRetried, opOpen, opEscalated, opLate, opRefused}

// storyProfile is the story's provider: looked up by our reference, keys
// kept a day.
var storyProfile = domain.ProviderProfile{Name: "story", API: "fake", KeyRetention: 24 * time.Hour,
	ReplaysSavedErrors: true, ReferenceField: "operation_id", KeyPolicy: domain.KeyPerAttempt}

// fakeProvider answers the reconciler's lookups from a table.
type fakeProvider struct {
	refunds map[domain.OperationID][]domain.ProviderEffect
	fail    map[domain.OperationID]bool
}

func (p *fakeProvider) CreateRefund(context.Context, domain.RefundRequest) domain.RefundResult {
	return domain.RefundResult{Outcome: domain.Unknown, Detail: "the story never resends"}
}

func (p *fakeProvider) LookupByReference(_ context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	if p.fail[op] {
		return nil, errors.New("provider lookup timed out")
	}
	return p.refunds[op], nil
}

func (p *fakeProvider) RetrieveByKey(context.Context, domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	return domain.ProviderEffect{}, false, domain.ErrReadUnsupported
}

// story drives the real command handler, sweeper and reconciler through the
// seed's Thursday and Friday and a handful of other operations, and returns
// how many events it wrote.
type story struct {
	t     testing.TB
	ctx   context.Context
	store eventstore.Store
	clk   *clock.Manual
	h     *ledger.Handler
	sweep *recovery.Sweeper
	recon *recovery.Reconciler
	// secrets are the lease secrets the claims returned.
	secrets map[domain.ExecutionID]string
}

func newStory(t testing.TB, store eventstore.Store) *story {
	s := &story{t: t, ctx: context.Background(), store: store, clk: clock.NewManual(t0), secrets: map[domain.ExecutionID]string{}}
	var err error
	s.h, err = ledger.New(ledger.Config{Store: store, Clock: s.clk, Logger: quiet, AppendRetryBackoff: time.Millisecond})
	require.NoError(t, err)
	failing := &setaside.Memory{}
	index, err := recovery.NewLogIndex(recovery.LogIndexConfig{Store: store, SetAside: failing, Clock: s.clk, Logger: quiet})
	require.NoError(t, err)
	s.sweep, err = recovery.NewSweeper(recovery.SweeperConfig{Ledger: s.h, Index: index, Logger: quiet, SetAside: failing})
	require.NoError(t, err)
	provider := &fakeProvider{
		refunds: map[domain.OperationID][]domain.ProviderEffect{
			opThursday:  {{Reference: "re_sim00000001", OperationID: opThursday, IdempotencyKey: "refund-OP-4471-a1", State: domain.EffectApplied, AmountMinor: 12000, Currency: "eur"}},
			opEscalated: {{Reference: "re_sim00000004", OperationID: opEscalated, IdempotencyKey: "refund-OP-5004-manual", State: domain.EffectApplied, AmountMinor: 12000, Currency: "eur"}},
		},
		fail: map[domain.OperationID]bool{opOpen: true},
	}
	s.recon, err = recovery.NewReconciler(recovery.ReconcilerConfig{Ledger: s.h, Index: index, Provider: provider,
		Profile: storyProfile, Logger: quiet, SetAside: failing})
	require.NoError(t, err)
	return s
}

func (s *story) at(d time.Duration) { s.clk.Advance(t0.Add(d).Sub(s.clk.Now())) }

func (s *story) request(op domain.OperationID) {
	s.t.Helper()
	_, err := s.h.RequestOperation(s.ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-8841", AmountMinor: 12000,
		Currency: "EUR", OrderTotalMinor: 20000, CorrelationID: "COR-2210", RequestedBy: "agent-7"}, ledger.Cause{Actor: "agent-7"})
	require.NoError(s.t, err)
}

func (s *story) decide(op domain.OperationID, dec domain.DecisionID, facts domain.Facts) domain.Decided {
	s.t.Helper()
	d, _, err := s.h.Decide(s.ctx, op, domain.Decide{DecisionID: dec, Approver: "agent-7", ApprovalLimitMinor: 50000, Facts: facts},
		ledger.Cause{Actor: "refund-api"})
	require.NoError(s.t, err)
	return d
}

func (s *story) issue(op domain.OperationID, c domain.CapabilityID) {
	s.t.Helper()
	_, err := s.h.IssueCapability(s.ctx, op, domain.IssueCapability{CapabilityID: c}, ledger.Cause{Actor: "refund-api"})
	require.NoError(s.t, err)
}

func (s *story) present(op domain.OperationID, msg domain.MessageID, c domain.CapabilityID, worker string, x domain.ExecutionID) ledger.ClaimOutcome {
	s.t.Helper()
	out, err := s.h.Claim(s.ctx, op, domain.Claim{MessageID: msg, CorrelationID: "COR-2210", CapabilityID: c, WorkerID: worker, ExecutionID: x})
	require.NoError(s.t, err)
	if out.Status == domain.StatusClaimed {
		s.secrets[out.ExecutionID] = out.LeaseSecret
	}
	return out
}

func (s *story) record(op domain.OperationID, x domain.ExecutionID, worker string, o domain.Outcome, ref, detail string) error {
	return s.h.RecordOutcome(s.ctx, op, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: s.secrets[x], Outcome: o, ProviderReference: ref, Detail: detail},
		ledger.Cause{Actor: worker, CausationID: string(x)})
}

func (s *story) renew(op domain.OperationID, x domain.ExecutionID, worker string) {
	s.t.Helper()
	_, err := s.h.RenewLease(s.ctx, op, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: s.secrets[x], WorkerID: worker}, ledger.Cause{Actor: worker})
	require.NoError(s.t, err)
}

// write plays the story and returns the number of events in the log.
func (s *story) write() int64 {
	t := s.t
	ok := domain.Facts{OrderRefundable: true}

	// Thursday, OP-4471, as the seed tells it.
	s.request(opThursday)
	s.decide(opThursday, "DEC-3381", ok)
	s.issue(opThursday, "CAP-91F") // single use, expires 14:17:10
	s.at(3 * time.Second)          // 14:02:13 worker A claims
	require.Equal(t, domain.StatusClaimed, s.present(opThursday, "MSG-55A", "CAP-91F", "worker-a", "EXE-1").Status)
	s.at(30 * time.Second) // 14:02:40 the last renewal
	s.renew(opThursday, "EXE-1", "worker-a")
	// 14:02:43 the provider created the refund; the response is lost and worker A's process recycled.
	s.at(34 * time.Second) // 14:02:44 the queue redelivers to worker B
	require.Equal(t, domain.StatusDuplicateDelivery, s.present(opThursday, "MSG-55A", "CAP-91F", "worker-b", "").Status)
	s.at(90 * time.Second) // 14:03:40 the lease lapses; the sweeper marks EXE-1 Unknown
	s.settle()
	n, err := s.sweep.SweepOnce(s.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	s.at(170 * time.Second) // 14:05 reconciliation finds the refund
	s.settle()
	steps, err := s.recon.ReconcileOnce(s.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 1)
	require.Equal(t, recovery.VerdictCompleted, steps[0].Verdict)
	s.at(4 * time.Minute) // worker A comes back: its epoch-1 write is refused and recorded
	err = s.record(opThursday, "EXE-1", "worker-a", domain.Completed, "re_sim00000001", "late 200")
	requireRefusal(t, err, domain.ReasonLeaseLost)

	// OP-5001: the plain path.
	s.at(10 * time.Minute)
	s.request(opHappy)
	s.decide(opHappy, "DEC-5001", ok)
	s.issue(opHappy, "CAP-5001")
	s.present(opHappy, "MSG-5001", "CAP-5001", "worker-a", "EXE-5001")
	s.at(10*time.Minute + 20*time.Second)
	s.renew(opHappy, "EXE-5001", "worker-a")
	require.NoError(t, s.record(opHappy, "EXE-5001", "worker-a", domain.Completed, "re_sim00000002", "200"))

	// OP-5002: NotApplied; the spent capability replayed; a new attempt denied, then allowed.
	s.at(20 * time.Minute)
	s.request(opRetried)
	s.decide(opRetried, "DEC-5002", ok)
	s.issue(opRetried, "CAP-5002A")
	s.present(opRetried, "MSG-5002A", "CAP-5002A", "worker-a", "EXE-5002A")
	require.NoError(t, s.record(opRetried, "EXE-5002A", "worker-a", domain.NotApplied, "", "400 parameter_invalid"))
	r := s.present(opRetried, "MSG-5002B", "CAP-5002A", "worker-b", "")
	require.Equal(t, domain.StatusAlreadyConsumed, r.Status)
	require.True(t, r.ReplaySuspected)
	require.Equal(t, domain.Denied, s.decide(opRetried, "DEC-5003", domain.Facts{OrderRefundable: true, ChargebackOpen: true}).Verdict)
	require.Equal(t, 2, s.decide(opRetried, "DEC-5004", ok).Attempt)
	s.issue(opRetried, "CAP-5002B")
	s.present(opRetried, "MSG-5002C", "CAP-5002B", "worker-a", "EXE-5002B")
	require.NoError(t, s.record(opRetried, "EXE-5002B", "worker-a", domain.Completed, "re_sim00000003", "200"))

	// OP-5003: the executor's own Unknown; lookups fail, so it stays open.
	s.at(30 * time.Minute)
	s.request(opOpen)
	s.decide(opOpen, "DEC-5005", ok)
	s.issue(opOpen, "CAP-5003")
	s.present(opOpen, "MSG-5003", "CAP-5003", "worker-a", "EXE-5003")
	require.NoError(t, s.record(opOpen, "EXE-5003", "worker-a", domain.Unknown, "", "timeout after send"))
	s.issue(opOpen, "CAP-5003B") // someone reissues authority instead of reconciling: the barrier refuses it
	require.Equal(t, domain.StatusOperationNotExecutable, s.present(opOpen, "MSG-5003B", "CAP-5003B", "worker-b", "").Status)
	// OP-5004: the executor's Unknown; the provider shows a refund under another key: escalated.
	s.request(opEscalated)
	s.decide(opEscalated, "DEC-5006", ok)
	s.issue(opEscalated, "CAP-5004")
	s.present(opEscalated, "MSG-5004", "CAP-5004", "worker-a", "EXE-5004")
	require.NoError(t, s.record(opEscalated, "EXE-5004", "worker-a", domain.Unknown, "", "connection reset"))
	s.at(31 * time.Minute)
	s.settle()
	steps, err = s.recon.ReconcileOnce(s.ctx)
	require.NoError(t, err)
	require.Len(t, steps, 2)

	// OP-5005: the lease lapses; the stale executor's late result resolves it.
	s.at(40 * time.Minute)
	s.request(opLate)
	s.decide(opLate, "DEC-5007", ok)
	s.issue(opLate, "CAP-5005")
	s.present(opLate, "MSG-5005", "CAP-5005", "worker-a", "EXE-5005")
	s.at(41 * time.Minute)
	s.settle()
	n, err = s.sweep.SweepOnce(s.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, s.h.RecordLateOutcome(s.ctx, opLate, domain.RecordLateOutcome{ExecutionID: "EXE-5005", LeaseEpoch: 1, LeaseSecret: s.secrets["EXE-5005"],
		Outcome: domain.Completed, ProviderReference: "re_sim00000005", Detail: "200 after the lease was lost"}, ledger.Cause{Actor: "worker-a", CausationID: "EXE-5005"}))

	// OP-5006: refusals of every kind, all recorded; its execution is still running at the end.
	s.at(50 * time.Minute)
	s.request(opRefused)
	s.decide(opRefused, "DEC-5008", ok)
	s.issue(opRefused, "CAP-5006A")
	require.NoError(t, s.h.RevokeCapability(s.ctx, opRefused, domain.RevokeCapability{CapabilityID: "CAP-5006A", Reason: "agent withdrew", Actor: "agent-7"}, ledger.Cause{Actor: "agent-7"}))
	require.Equal(t, domain.StatusRevoked, s.present(opRefused, "MSG-5006A", "CAP-5006A", "worker-a", "").Status)
	s.issue(opRefused, "CAP-5006B")
	s.at(66 * time.Minute)
	require.Equal(t, domain.StatusExpired, s.present(opRefused, "MSG-5006B", "CAP-5006B", "worker-a", "").Status)
	s.issue(opRefused, "CAP-5006C")
	s.issue(opRefused, "CAP-5006D")
	require.Equal(t, domain.StatusClaimed, s.present(opRefused, "MSG-5006C", "CAP-5006C", "worker-a", "EXE-5006").Status)
	require.Equal(t, domain.StatusOperationNotExecutable, s.present(opRefused, "MSG-5006D", "CAP-5006D", "worker-b", "").Status)
	out, err := s.h.Claim(s.ctx, "OP-NOPE", domain.Claim{MessageID: "MSG-X", CapabilityID: "CAP-X", WorkerID: "worker-b"})
	require.NoError(t, err)
	require.Equal(t, domain.ReasonOperationUnknown, out.Reason)

	// Friday 15:30: "resubmit all" sends a copy of MSG-55A under a new id, still naming CAP-91F.
	s.at(25*time.Hour + 27*time.Minute + 50*time.Second)
	r = s.present(opThursday, "MSG-77C", "CAP-91F", "worker-c", "")
	require.Equal(t, domain.StatusAlreadyConsumed, r.Status)
	require.True(t, r.ReplaySuspected)

	return s.written()
}

// written counts the events the story has written so far.
func (s *story) written() int64 {
	total := streamLength(s.t, s.store, domain.EvidenceStream)
	for day := t0.Truncate(24 * time.Hour); !day.After(s.clk.Now()); day = day.AddDate(0, 0, 1) { // each day's unattributed stream
		total += streamLength(s.t, s.store, domain.UnattributedStreamFor(day))
	}
	for _, op := range storyOperations {
		total += streamLength(s.t, s.store, op.StreamName()) + streamLength(s.t, s.store, domain.EvidenceStreamOf(op))
	}
	return total
}

// settle waits until the global log shows everything written so far: the
// sweeper and the reconciler find their work through it.
func (s *story) settle() { waitVisible(s.t, s.store, s.written()) }

var quiet = slog.New(slog.DiscardHandler)

func requireRefusal(t testing.TB, err error, reason domain.Reason) {
	t.Helper()
	var r *domain.Refusal
	require.True(t, errors.As(err, &r), "want refusal %s, got %v", reason, err)
	require.Equal(t, reason, r.Reason, r.Detail)
}
