package roles_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/roles"
	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// memCheckpoints keeps relay checkpoints in memory.
type memCheckpoints struct {
	mu  sync.Mutex
	pos map[string]string
}

func (m *memCheckpoints) Load(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos[name], nil
}

func (m *memCheckpoints) Save(_ context.Context, name, position string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos[name] = position
	return nil
}

// publisher keeps what it is given.
type publisher struct {
	mu  sync.Mutex
	got []transport.Outbound
}

func (p *publisher) Publish(_ context.Context, msgs []transport.Outbound) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, msgs...)
	return nil
}

func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// view is one role's view of the store.
type view struct {
	eventstore.Store
	name string
}

// nobody is a provider that is never asked here.
type nobody struct{ domain.Provider }

// Build gives each role the view named after it and a ledger on that view,
// and the shared ports (clock, set-aside store, a log index on the index's
// view) to each; serve's standard relays, each on its own view.
func TestBuildWiresEachRoleOnItsView(t *testing.T) {
	t.Parallel()
	clk := clock.NewManual(time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC))
	store := memory.New(clk.Now)
	var (
		views   []string
		ledgers = map[eventstore.Store]*ledger.Handler{}
	)
	failing := &setaside.Memory{}
	pub := &publisher{}
	built, err := roles.Build(roles.Config{
		Store: store, Clock: clk, SetAside: failing,
		View: func(name string) eventstore.Store {
			views = append(views, name)
			return &view{Store: store, name: name} // a distinct view per role
		},
		Ledger: func(view eventstore.Store) (*ledger.Handler, error) {
			h, err := ledger.New(ledger.Config{Store: view, Clock: clk})
			ledgers[view] = h
			return h, err
		},
		Sweeper:    &recovery.SweeperConfig{},
		Reconciler: &recovery.ReconcilerConfig{Provider: nobody{}, Profile: provider.StripeV1},
		Relays:     &transport.RelaysConfig{Checkpoints: &memCheckpoints{pos: map[string]string{}}, Publisher: pub},
	})
	require.NoError(t, err)
	require.Equal(t, []string{roles.Index, roles.Sweeper, roles.Reconciler,
		roles.Relay + " " + transport.RelayRefundRequests, roles.Relay + " " + transport.RelaySecuritySignals}, views)
	var onViews []string
	for v := range ledgers {
		onViews = append(onViews, v.(*view).name)
	}
	require.ElementsMatch(t, []string{roles.Sweeper, roles.Reconciler}, onViews, "the sweeper and the reconciler each write through a ledger on their view")
	require.IsType(t, &recovery.LogIndex{}, built.Index, "without a projector: the log index")
	require.NotNil(t, built.Sweeper)
	require.NotNil(t, built.Reconciler)
	require.Nil(t, built.Projector)
	var names []string
	for _, r := range built.Relays {
		names = append(names, r.Name())
	}
	require.Equal(t, []string{transport.RelayRefundRequests, transport.RelaySecuritySignals}, names)

	// The relays publish what the log holds: a capability issued is a
	// refund request.
	h, err := ledger.New(ledger.Config{Store: store, Clock: clk})
	require.NoError(t, err)
	_, err = h.RequestOperation(t.Context(), domain.RequestOperation{OperationID: "OP-1", OrderID: "ORD-1", AmountMinor: 100, Currency: "EUR",
		OrderTotalMinor: 200, CorrelationID: "COR-1"}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	_, _, err = h.DecideAndIssue(t.Context(), "OP-1", domain.Decide{Approver: "a", ApprovalLimitMinor: 1000,
		Facts: domain.Facts{OrderRefundable: true}, KeyPolicy: domain.KeyPerAttempt}, domain.IssueCapability{}, ledger.Cause{Actor: "t"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for _, r := range built.Relays {
		wg.Go(func() { _ = r.Run(ctx) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for pub.count() < 1 {
		require.True(t, time.Now().Before(deadline), "the refund request was not published")
		time.Sleep(time.Millisecond) // polling with a bound
	}
	cancel()
	wg.Wait()
	require.Equal(t, 1, pub.count())
}

// A role left out is not built; the store is the one thing required.
func TestBuildOnlyWhatIsAskedFor(t *testing.T) {
	t.Parallel()
	built, err := roles.Build(roles.Config{Store: memory.New(nil)})
	require.NoError(t, err)
	require.Nil(t, built.Sweeper)
	require.Nil(t, built.Reconciler)
	require.Nil(t, built.Index, "no index without a role that needs one")
	require.Empty(t, built.Relays)

	_, err = roles.Build(roles.Config{})
	require.ErrorContains(t, err, "Store is required")
	_, err = roles.Build(roles.Config{Store: memory.New(nil), Reconciler: &recovery.ReconcilerConfig{}})
	require.Error(t, err, "the reconciler's own validation still applies")
}
