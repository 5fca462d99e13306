package audit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/memory"
	"opledger/eventstore/postgres/pgtest"
)

// t0 is Thursday 14:02:10 UTC, when the seed story's refund is approved.
var t0 = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// backend opens a fresh, empty store.
type backend struct {
	name string
	open func(t *testing.T) eventstore.Store
}

var backends = []backend{
	{"memory", func(t *testing.T) eventstore.Store { return memory.New(nil) }},
	{"postgres", func(t *testing.T) eventstore.Store { return pgtest.OpenStore(t) }},
}

// onEveryBackend runs f as a parallel subtest per backend.
func onEveryBackend(t *testing.T, f func(t *testing.T, store eventstore.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open(t))
		})
	}
}

// history writes events straight into a store, bypassing the command
// handler, so that a test can write a history the handler never would.
type history struct {
	t      *testing.T
	store  eventstore.Store
	stream string
	op     domain.OperationID
	next   int64 // the version the next event gets
}

func newHistory(t *testing.T, store eventstore.Store, op domain.OperationID) *history {
	return &history{t: t, store: store, stream: op.StreamName(), op: op}
}

// add appends events as actor "test", one append per call.
func (h *history) add(events ...domain.Event) { h.by("test", "", events...) }

// by appends events with metadata naming actor and causation; the metadata
// time is the first event's own.
func (h *history) by(actor, causation string, events ...domain.Event) {
	h.t.Helper()
	meta := domain.Metadata{CorrelationID: "COR-2210", CausationID: causation, Actor: actor, RecordedAt: t0}
	data := make([]eventstore.EventData, 0, len(events))
	for _, e := range events {
		d, err := codec.EncodeEvent(ledger.NewID(""), e, meta)
		require.NoError(h.t, err)
		data = append(data, d)
	}
	h.append(data)
}

// raw appends one event of type typ with data as its JSON.
func (h *history) raw(typ, data string) {
	h.t.Helper()
	h.rawAt(typ, 1, data)
}

// rawAt appends one event of type typ, stored at schema version v, with
// data as its JSON.
func (h *history) rawAt(typ string, v int, data string) {
	h.t.Helper()
	meta, err := codec.EncodeMetadata(domain.Metadata{Actor: "test", RecordedAt: t0}, v)
	require.NoError(h.t, err)
	h.append([]eventstore.EventData{{ID: ledger.NewID(""), Type: typ, Data: []byte(data), Metadata: meta}})
}

func (h *history) append(data []eventstore.EventData) {
	h.t.Helper()
	_, err := h.store.Append(context.Background(), h.stream, eventstore.Exact(h.next-1), data)
	require.NoError(h.t, err)
	h.next += int64(len(data))
}

// The events of a well-behaved operation, for histories to start from and
// deviate.

func requested(op domain.OperationID) domain.OperationRequested {
	return domain.OperationRequested{OperationID: op, OrderID: "ORD-8841", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: "COR-2210", RequestedBy: "agent-7", RequestedAt: t0}
}

func allow(op domain.OperationID, dec domain.DecisionID, attempt int) domain.Decided {
	return domain.Decided{DecisionID: dec, Verdict: domain.Allowed, Facts: domain.Facts{OrderRefundable: true},
		Approver: "agent-7", ApprovalLimit: 50000, PolicyVersion: domain.PolicyVersion, Attempt: attempt,
		KeyPolicy: domain.KeyPerAttempt, IdempotencyKey: domain.IdempotencyKeyFor(op, attempt), DecidedAt: t0}
}

func issue(c domain.CapabilityID, dec domain.DecisionID, attempt int, at time.Time) domain.CapabilityIssued {
	return domain.CapabilityIssued{CapabilityID: c, DecisionID: dec, Attempt: attempt, IssuedAt: at, ExpiresAt: at.Add(domain.DefaultCapabilityTTL)}
}

func claim(op domain.OperationID, x domain.ExecutionID, c domain.CapabilityID, msg domain.MessageID, worker string, attempt int, at time.Time) domain.Claimed {
	return domain.Claimed{ExecutionID: x, CapabilityID: c, MessageID: msg, WorkerID: worker, Attempt: attempt, LeaseEpoch: 1,
		LeaseExpiresAt: at.Add(domain.DefaultLeaseDuration), IdempotencyKey: domain.IdempotencyKeyFor(op, attempt), ClaimedAt: at}
}

func outcome(x domain.ExecutionID, epoch int64, o domain.Outcome, ref string, at time.Time) domain.OutcomeRecorded {
	return domain.OutcomeRecorded{ExecutionID: x, LeaseEpoch: epoch, Outcome: o, ProviderReference: ref, RecordedAt: at}
}

func lapse(x domain.ExecutionID, from int64, expired, at time.Time) domain.LeaseLapsed {
	return domain.LeaseLapsed{ExecutionID: x, FromEpoch: from, ToEpoch: from + 1, LeaseExpiredAt: expired, LapsedAt: at}
}

// start writes a requested operation with an allowed attempt 1 and
// capability CAP-1.
func (h *history) start() {
	h.add(requested(h.op), allow(h.op, "DEC-1", 1), issue("CAP-1", "DEC-1", 1, t0))
}

// claimed writes start() and the claim of CAP-1 as EXE-1 on MSG-1 by worker-a at t0+3s.
func (h *history) claimed() {
	h.start()
	h.by("worker-a", "MSG-1", claim(h.op, "EXE-1", "CAP-1", "MSG-1", "worker-a", 1, t0.Add(3*time.Second)))
}

// visibleBound bounds waiting for committed events to become visible in the
// global log: Postgres withholds them while an older transaction of any test
// sharing the server is still open.
const visibleBound = 30 * time.Second

// waitVisible polls the global log, with a bounded back-off, until it holds
// at least n events.
func waitVisible(t testing.TB, store eventstore.Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(visibleBound)
	pause := time.Millisecond
	for {
		var seen int64
		var after eventstore.Position
		for {
			page, err := store.ReadAll(context.Background(), after, 1000)
			require.NoError(t, err)
			seen += int64(len(page))
			if len(page) < 1000 {
				break
			}
			after = page[len(page)-1].Position
		}
		if seen >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events visible after %s", seen, n, visibleBound)
		}
		time.Sleep(pause) // a bounded poll: nothing signals visibility
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// streamLength counts the events of stream.
func streamLength(t testing.TB, store eventstore.Store, stream string) int64 {
	t.Helper()
	events, err := store.ReadStream(context.Background(), stream, 0, 100_000)
	require.NoError(t, err)
	return int64(len(events))
}

// verify waits until n events are visible, runs Verify and requires it to
// finish.
func verify(t *testing.T, store eventstore.Store, n int64, opts audit.VerifyOptions) audit.Report {
	t.Helper()
	waitVisible(t, store, n)
	rep, err := audit.Verify(context.Background(), store, opts)
	require.NoError(t, err)
	require.True(t, rep.Complete)
	return rep
}

// invariantIDs lists the distinct invariants a report names, sorted.
func invariantIDs(r audit.Report) []string {
	var ids []string
	for _, v := range r.Violations {
		if !slices.Contains(ids, v.Invariant) {
			ids = append(ids, v.Invariant)
		}
	}
	slices.Sort(ids)
	return ids
}

// onEveryBackendShared runs f once per backend, handing it the backend's
// opener, for tests that open a store per subtest.
func onEveryBackendShared(t *testing.T, f func(t *testing.T, open func(t *testing.T) eventstore.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b.open)
		})
	}
}

func newMemoryStore() eventstore.Store { return memory.New(nil) }
