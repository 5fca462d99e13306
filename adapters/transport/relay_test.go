package transport_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
)

type memCheckpoints struct {
	mu    sync.Mutex
	pos   map[string]string
	fails int // the next Saves fail
	saves int // Saves that succeeded
}

func (m *memCheckpoints) Load(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos[name], nil
}

func (m *memCheckpoints) Save(_ context.Context, name, position string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fails > 0 {
		m.fails--
		return errors.New("crash before the checkpoint")
	}
	m.pos[name] = position
	m.saves++
	return nil
}

func (m *memCheckpoints) counts() (saves int, pos string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves, m.pos["refund-requests"]
}

type memPublisher struct {
	mu  sync.Mutex
	got []transport.Outbound
}

func (m *memPublisher) Publish(_ context.Context, msgs []transport.Outbound) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, msgs...)
	return nil
}

func (m *memPublisher) messages() []transport.Outbound {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]transport.Outbound(nil), m.got...)
}

// approve writes a requested, decided operation with one capability.
func approve(t *testing.T, h *ledger.Handler, op domain.OperationID) domain.CapabilityIssued {
	t.Helper()
	ctx := t.Context()
	_, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR", OrderTotalMinor: 200, CorrelationID: "COR-" + domain.CorrelationID(op)}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	_, _, err = h.Decide(ctx, op, domain.Decide{Approver: "a", ApprovalLimitMinor: 1000, Facts: domain.Facts{OrderRefundable: true}, KeyPolicy: domain.KeyPerAttempt}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	c, err := h.IssueCapability(ctx, op, domain.IssueCapability{}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	return c
}

// One message per CapabilityIssued, identifiers only, keyed by operation;
// a crash between publishing and checkpointing publishes the same ids again.
func TestRelayPublishesStableIDsAgainAfterACrash(t *testing.T) {
	t.Parallel()
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	c1 := approve(t, h, "OP-1")
	c2 := approve(t, h, "OP-2")

	checks := &memCheckpoints{pos: map[string]string{}, fails: 1}
	pub := &memPublisher{}
	r, err := transport.NewRelay(transport.RelayConfig{Name: "refund-requests", Store: store, Checkpoints: checks, Publisher: pub,
		Select: transport.SelectRefundRequests, PollMax: 10 * time.Millisecond, FailureBackoff: time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for r.Published() < 4 {
		require.True(t, time.Now().Before(deadline), "relay published %d", r.Published())
		time.Sleep(time.Millisecond) // polling with a bound
	}
	for { // the relay saves once it finds the log idle
		if _, pos := checks.counts(); pos != "" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the relay never saved its checkpoint")
		time.Sleep(time.Millisecond) // polling with a bound
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)

	got := pub.messages()
	require.Len(t, got, 4, "the batch went out twice: once before the failed checkpoint, once after")
	require.Equal(t, got[:2], got[2:], "the same ids, keys and values both times")
	for i, want := range []struct {
		op  domain.OperationID
		cap domain.CapabilityID
	}{{"OP-1", c1.CapabilityID}, {"OP-2", c2.CapabilityID}} {
		m := got[i]
		require.Equal(t, transport.TopicRefundRequests, m.Topic)
		require.Equal(t, string(want.op), m.Key)
		req, err := transport.DecodeRefundRequest(m.Value)
		require.NoError(t, err)
		require.Equal(t, want.op, req.OperationID)
		require.Equal(t, want.cap, req.CapabilityID)
		require.Equal(t, domain.CorrelationID("COR-"+string(want.op)), req.CorrelationID)
		require.Equal(t, string(req.MessageID), m.MessageID)
		require.Equal(t, m.MessageID, m.Headers[transport.HeaderMessageID])
	}
	require.NotEmpty(t, checks.pos["refund-requests"])
}

// A relay that keeps finding events saves its checkpoint once per
// CheckpointInterval (by its clock, which stands still here) and when the
// log is idle, not once per batch: nine batches of one event, one save.
func TestRelaySavesItsCheckpointWhenIdle(t *testing.T) {
	t.Parallel()
	now := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(now.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: now})
	require.NoError(t, err)
	for _, op := range []domain.OperationID{"OP-1", "OP-2", "OP-3"} {
		approve(t, h, op)
	}
	all, err := store.ReadAll(t.Context(), nil, 100)
	require.NoError(t, err)
	require.Len(t, all, 9)

	checks := &memCheckpoints{pos: map[string]string{}}
	pub := &memPublisher{}
	r, err := transport.NewRelay(transport.RelayConfig{Name: "refund-requests", Store: store, Checkpoints: checks, Publisher: pub,
		Select: transport.SelectRefundRequests, BatchSize: 1, CheckpointInterval: time.Minute, Clock: now,
		PollMin: time.Millisecond, PollMax: 5 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, pos := checks.counts(); pos == all[8].Position.String() {
			break
		}
		require.True(t, time.Now().Before(deadline), "the relay never saved its checkpoint at the end of the log")
		time.Sleep(time.Millisecond) // polling with a bound
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	saves, _ := checks.counts()
	require.Equal(t, 1, saves, "one save for nine batches")
	require.Len(t, pub.messages(), 3, "every capability published once")
}
