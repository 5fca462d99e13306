package feed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/domain/feed"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

var t0 = time.Date(2026, 11, 26, 14, 2, 0, 0, time.UTC)

// appendEvents writes events to op's stream (or to stream, when op is
// empty) and returns their ids.
func appendEvents(t *testing.T, s eventstore.Store, stream string, events ...domain.Event) []string {
	t.Helper()
	var data []eventstore.EventData
	var ids []string
	for _, e := range events {
		id := uuid.NewString()
		d, err := codec.EncodeEvent(id, e, domain.Metadata{CorrelationID: "COR-1", RecordedAt: t0})
		require.NoError(t, err)
		data, ids = append(data, d), append(ids, id)
	}
	_, err := s.Append(t.Context(), stream, eventstore.Any(), data)
	require.NoError(t, err)
	return ids
}

func requested(op domain.OperationID, amount int64) domain.OperationRequested {
	return domain.OperationRequested{OperationID: op, Kind: domain.KindRefund, OrderID: "ORD-" + string(op), AmountMinor: amount,
		Currency: "EUR", OrderTotalMinor: 50_000, CorrelationID: "COR-" + domain.CorrelationID(op), RequestedAt: t0}
}

// story writes the README's Thursday: requested, authorized, claimed, a
// renewal and a duplicate delivery (no change), lapsed to Unknown,
// reconciled Completed.
func story(t *testing.T, s eventstore.Store, op domain.OperationID) {
	t.Helper()
	x := domain.ExecutionID("EXE-" + string(op)[3:] + ".1")
	c := domain.CapabilityID("CAP-" + string(op)[3:] + ".1")
	st := op.StreamName()
	appendEvents(t, s, st, requested(op, 12_000))
	appendEvents(t, s, st,
		domain.Decided{DecisionID: "DEC-1", Kind: domain.KindRefund, Verdict: domain.Allowed, Approver: "alice", PolicyVersion: "p1",
			Attempt: 1, Uses: 1, KeyPolicy: domain.KeyPerAttempt, IdempotencyKey: "refund-" + domain.IdempotencyKey(op) + "-a1", DecidedAt: t0},
		domain.CapabilityIssued{CapabilityID: c, DecisionID: "DEC-1", Kind: domain.KindRefund, Attempt: 1, Uses: 1, IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)})
	appendEvents(t, s, st, domain.Claimed{ExecutionID: x, CapabilityID: c, Kind: domain.KindRefund, MessageID: "MSG-1", WorkerID: "w-a",
		Attempt: 1, Use: 1, LeaseEpoch: 1, LeaseExpiresAt: t0.Add(time.Minute), IdempotencyKey: "refund-" + domain.IdempotencyKey(op) + "-a1", ClaimedAt: t0})
	appendEvents(t, s, st, domain.LeaseRenewed{ExecutionID: x, LeaseEpoch: 1, LeaseExpiresAt: t0.Add(2 * time.Minute), RenewedAt: t0})
	appendEvents(t, s, st, domain.DeliveryDuplicated{MessageID: "MSG-1", CapabilityID: c, WorkerID: "w-b", ExecutionID: x, ExecutionState: domain.ExecExecuting, SeenAt: t0})
	appendEvents(t, s, st, domain.LeaseLapsed{ExecutionID: x, FromEpoch: 1, ToEpoch: 2, LeaseExpiredAt: t0.Add(2 * time.Minute), LapsedAt: t0.Add(3 * time.Minute)})
	appendEvents(t, s, st, domain.Reconciled{ExecutionID: x, Outcome: domain.Completed, Method: domain.MethodProviderLookup,
		ProviderReference: "re_123", ReconciledAt: t0.Add(4 * time.Minute)})
}

func newReader(t *testing.T, s eventstore.Store, tune ...func(*feed.ReaderConfig)) *feed.Reader {
	t.Helper()
	cfg := feed.ReaderConfig{Store: s, PollMin: time.Millisecond, PollMax: 5 * time.Millisecond}
	for _, f := range tune {
		f(&cfg)
	}
	r, err := feed.NewReader(cfg)
	require.NoError(t, err)
	return r
}

func states(es []feed.Entry) []feed.State {
	var out []feed.State
	for _, e := range es {
		out = append(out, e.State)
	}
	return out
}

// Every change of the story is an entry, in order, with the operation's
// amount and references; renewals and duplicate deliveries are none;
// evidence of no operation is none.
func TestStoryEntries(t *testing.T) {
	t.Parallel()
	s := memory.New(func() time.Time { return t0 })
	story(t, s, "OP-4471")
	appendEvents(t, s, domain.EvidenceStream, domain.PresentationRejected{Status: domain.ClaimStatus("Rejected"), Reason: domain.ReasonCapabilityInvalid,
		MessageID: "MSG-X", OperationID: "OP-NOPE", RejectedAt: t0})
	all, err := s.ReadAll(t.Context(), nil, 100)
	require.NoError(t, err)

	page, err := newReader(t, s).Read(t.Context(), nil, 100)
	require.NoError(t, err)
	require.False(t, page.Full)
	require.Equal(t, all[len(all)-1].Position.String(), page.Next.String(), "Next is the last event read, an entry or not")
	require.Equal(t, []feed.State{feed.StateRequested, feed.StateAuthorized, feed.StateExecuting, feed.StateUnknown, feed.StateReconciled}, states(page.Entries))
	byVersion := map[int64]eventstore.RecordedEvent{}
	for _, rec := range all {
		if rec.StreamID == "operation-OP-4471" {
			byVersion[rec.Version] = rec
		}
	}
	for _, e := range page.Entries {
		rec := byVersion[e.StreamVersion]
		require.Equal(t, rec.ID, e.EventID)
		require.Equal(t, rec.Type, e.EventType)
		require.Equal(t, rec.Position.String(), e.Position)
		require.Equal(t, domain.OperationID("OP-4471"), e.OperationID)
		require.Equal(t, domain.KindRefund, e.Kind)
		require.Equal(t, int64(12_000), e.AmountMinor)
		require.Equal(t, "EUR", e.Currency)
		require.Equal(t, "ORD-OP-4471", e.OrderID)
		require.Equal(t, domain.CorrelationID("COR-OP-4471"), e.CorrelationID)
	}
	exec, last := page.Entries[2], page.Entries[4]
	require.Equal(t, domain.ExecutionID("EXE-4471.1"), exec.ExecutionID)
	require.Equal(t, domain.IdempotencyKey("refund-OP-4471-a1"), exec.IdempotencyKey)
	require.Equal(t, domain.Completed, last.Outcome)
	require.Equal(t, "re_123", last.ProviderReference)
	require.Equal(t, domain.MethodProviderLookup, last.Method)
	require.Equal(t, t0.Add(4*time.Minute), last.At)
}

// Pages of any size, each read after the last one's Next, give the entries
// of one read of the whole log; a read resumed from an older position
// gives the same entries again, under the same event ids.
func TestPagesResumeAndRedeliver(t *testing.T) {
	t.Parallel()
	s := memory.New(func() time.Time { return t0 })
	for i := range 3 {
		story(t, s, domain.OperationID(fmt.Sprintf("OP-%d", 100+i)))
	}
	whole, err := newReader(t, s).Read(t.Context(), nil, feed.MaxPage)
	require.NoError(t, err)
	require.Len(t, whole.Entries, 15)
	for _, size := range []int{1, 2, 7} {
		r := newReader(t, s, func(c *feed.ReaderConfig) { c.HeadCache = 1 }) // heads read back from the streams
		var got []feed.Entry
		var after eventstore.Position
		for range 100 { // bound: the log has 27 events
			page, err := r.Read(t.Context(), after, size)
			require.NoError(t, err)
			got = append(got, page.Entries...)
			if !page.Full {
				break
			}
			text := page.Next.String()
			after, err = r.ParsePosition(text)
			require.NoError(t, err)
		}
		require.Equal(t, whole.Entries, got, "pages of %d", size)
	}
	// Resumed from the fourth entry: the rest again, the same ids.
	r := newReader(t, s)
	from, err := r.ParsePosition(whole.Entries[3].Position)
	require.NoError(t, err)
	again, err := r.Read(t.Context(), from, feed.MaxPage)
	require.NoError(t, err)
	require.Equal(t, whole.Entries[4:], again.Entries)
}

// Wait returns an entry appended while it waits, and after its wait an
// empty page whose Next went past the events that made none.
func TestWait(t *testing.T) {
	t.Parallel()
	s := memory.New(func() time.Time { return t0 })
	story(t, s, "OP-1")
	r := newReader(t, s)
	page, err := r.Read(t.Context(), nil, feed.MaxPage)
	require.NoError(t, err)
	short, err := r.Wait(t.Context(), nil, feed.MaxPage, time.Nanosecond, nil)
	require.NoError(t, err)
	require.Equal(t, page, short, "a wait shorter than a read still reads once")

	x := domain.ExecutionID("EXE-1.1")
	appendEvents(t, s, "operation-OP-1", domain.LeaseRenewed{ExecutionID: x, LeaseEpoch: 2, RenewedAt: t0}) // no entry
	quiet, err := r.Wait(t.Context(), page.Next, 10, time.Millisecond, nil)
	require.NoError(t, err)
	require.Empty(t, quiet.Entries)
	require.Positive(t, quiet.Next.Compare(page.Next), "Next moved past the renewal")

	got := make(chan feed.Page, 1)
	go func() {
		p, err := r.Wait(context.WithoutCancel(t.Context()), quiet.Next, 10, time.Minute, nil)
		if err != nil {
			p = feed.Page{}
		}
		got <- p
	}()
	appendEvents(t, s, "operation-OP-1", domain.Escalated{ExecutionID: x, Reason: "provider.cannot-tell", EscalatedAt: t0})
	select {
	case p := <-got:
		require.Equal(t, []feed.State{feed.StateEscalated}, states(p.Entries))
		require.Equal(t, "provider.cannot-tell", p.Entries[0].Reason)
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return the entry appended while it waited")
	}

	// A stop ends a wait at once, with what it read (nothing new).
	stop := make(chan struct{})
	stopped := make(chan error, 1)
	go func() {
		_, err := r.Wait(context.WithoutCancel(t.Context()), nil, 1, time.Hour, stop) // one event: the start of the log
		stopped <- err
	}()
	end, err := r.Read(t.Context(), nil, feed.MaxPage)
	require.NoError(t, err)
	go func() {
		p, err := r.Wait(context.WithoutCancel(t.Context()), end.Next, 10, time.Hour, stop)
		if err == nil && len(p.Entries) > 0 {
			err = fmt.Errorf("%d entries", len(p.Entries))
		}
		stopped <- err
	}()
	close(stop)
	for range 2 {
		select {
		case err := <-stopped:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a stopped wait did not return")
		}
	}
}

// A stream with no OperationRequested is corrupt: the read fails, naming
// it, rather than publish an entry without its amount.
func TestNoHead(t *testing.T) {
	t.Parallel()
	s := memory.New(func() time.Time { return t0 })
	appendEvents(t, s, "operation-OP-9", domain.Escalated{ExecutionID: "EXE-9.1", Reason: "x", EscalatedAt: t0})
	_, err := newReader(t, s).Read(t.Context(), nil, 10)
	require.ErrorIs(t, err, feed.ErrNoHead)
	require.ErrorContains(t, err, "operation-OP-9")
}

// Every state of the feed is one some event maps to, and the outcomes map
// to theirs.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	s := memory.New(func() time.Time { return t0 })
	op := domain.OperationID("OP-7")
	appendEvents(t, s, op.StreamName(), requested(op, 500),
		domain.Decided{DecisionID: "DEC-7.1", Kind: domain.KindRefund, Verdict: domain.Denied, Attempt: 1, Uses: 1, DecidedAt: t0},
		domain.CapabilityRevoked{CapabilityID: "CAP-7.1", Reason: "agent withdrew", RevokedAt: t0},
		domain.OutcomeRecorded{ExecutionID: "EXE-7.1", Outcome: domain.NotApplied, RecordedAt: t0},
		domain.OutcomeUnknown{ExecutionID: "EXE-7.2", Cause: "timeout", RecordedAt: t0},
		domain.LateOutcomeRecorded{ExecutionID: "EXE-7.2", Outcome: domain.Completed, ProviderReference: "re_7", RecordedAt: t0},
		domain.OutcomeRecorded{ExecutionID: "EXE-7.3", Outcome: domain.Completed, ProviderReference: "re_8", RecordedAt: t0})
	page, err := newReader(t, s).Read(t.Context(), nil, 100)
	require.NoError(t, err)
	require.Equal(t, []feed.State{feed.StateRequested, feed.StateDenied, feed.StateRevoked, feed.StateNotApplied,
		feed.StateUnknown, feed.StateCompleted, feed.StateCompleted}, states(page.Entries))
	require.Equal(t, domain.Completed, page.Entries[5].Outcome)
	require.Equal(t, "re_7", page.Entries[5].ProviderReference)
	require.Equal(t, domain.NotApplied, page.Entries[3].Outcome)
}

// failover is a store that a test switches to another (a standby that
// lacked the last commits, promoted).
type failover struct {
	eventstore.Store
}

// regressionLog keeps what the reader told.
type regressionLog struct {
	mu   sync.Mutex
	seen []eventstore.Regression
}

func (l *regressionLog) ObserveRegression(_ context.Context, r eventstore.Regression) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r)
}

// A cached head is not trusted past a log that went back: after a failover
// the operation was written again (another amount under the same id), and
// its next event sits before the head the reader remembered. The reader
// reads the head again, tells the observer, and the entry carries what the
// store holds now.
func TestHeadCacheNoticesALogThatWentBack(t *testing.T) {
	t.Parallel()
	primary := memory.New(func() time.Time { return t0 })
	appendEvents(t, primary, "operation-OP-0", requested("OP-0", 1))
	appendEvents(t, primary, "operation-OP-0", domain.OutcomeUnknown{ExecutionID: "EXE-0.1", Cause: "x", RecordedAt: t0})
	appendEvents(t, primary, "operation-OP-1", requested("OP-1", 100))
	s := &failover{Store: primary}
	log := &regressionLog{}
	r := newReader(t, s, func(c *feed.ReaderConfig) { c.Regressions = log })
	page, err := r.Read(t.Context(), nil, 10)
	require.NoError(t, err)
	require.Len(t, page.Entries, 3)

	standby := memory.New(func() time.Time { return t0 })
	appendEvents(t, standby, "operation-OP-1", requested("OP-1", 200))
	appendEvents(t, standby, "operation-OP-1", domain.OutcomeUnknown{ExecutionID: "EXE-1.1", Cause: "y", RecordedAt: t0})
	s.Store = standby
	first, err := standby.ReadAll(t.Context(), nil, 1)
	require.NoError(t, err)
	after, err := r.Read(t.Context(), first[0].Position, 10)
	require.NoError(t, err)
	require.Len(t, after.Entries, 1)
	require.Equal(t, int64(200), after.Entries[0].AmountMinor, "the head as the store holds it now")
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.seen, 1)
	require.Equal(t, domain.CacheFeedHead, log.seen[0].Cache)
	require.Equal(t, "operation-OP-1", log.seen[0].Stream)
}
