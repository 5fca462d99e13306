package provider_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// barrier holds every request until n are in flight at once, then lets the
// round through: each round really makes n calls at the same time.
type barrier struct {
	next    http.Handler
	n       int
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newBarrier(next http.Handler, n int) *barrier {
	return &barrier{next: next, n: n, open: make(chan struct{})}
}

func (b *barrier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	open := b.open
	b.waiting++
	if b.waiting == b.n {
		close(b.open)
		b.waiting, b.open = 0, make(chan struct{})
	}
	b.mu.Unlock()
	select {
	case <-open:
	case <-r.Context().Done():
		return
	}
	b.next.ServeHTTP(w, r)
}

// loopback serves the simulator behind a barrier of n calls and counts the
// connections it accepts.
func loopback(t *testing.T, n int) (url string, accepted *atomic.Int64) {
	t.Helper()
	s, err := sim.New(sim.Config{Start: t0, Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	accepted = &atomic.Int64{}
	srv := httptest.NewUnstartedServer(newBarrier(s, n))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	return srv.URL, accepted
}

// TestIdleConnectionsCoverTheConcurrentCalls: a client sized for n calls at
// once opens n connections in the first round of n concurrent calls and
// reuses them in every later round (Go's default pool of 2 would open n-2
// more each round); the export-delivery client the same.
func TestIdleConnectionsCoverTheConcurrentCalls(t *testing.T) {
	const n, rounds = 32, 4
	t.Run("provider", func(t *testing.T) {
		url, accepted := loopback(t, n)
		c, err := provider.New(provider.Config{BaseURL: url, Concurrency: n, MaxAttempts: 1})
		require.NoError(t, err)
		for round := range rounds {
			concurrently(n, func(i int) {
				op := domain.OperationID(fmt.Sprintf("OP-%d-%d", round, i))
				r := c.CreateRefund(t.Context(), domain.RefundRequest{OperationID: op, OrderID: "ORD-1", AmountMinor: 100,
					Currency: "EUR", IdempotencyKey: domain.IdempotencyKey("refund-" + string(op) + "-a1")})
				assert.Equal(t, domain.Completed, r.Outcome, r.Detail)
			})
			require.Equal(t, int64(n), accepted.Load(), "round %d: connections accepted", round+1)
		}
	})
	t.Run("export-delivery", func(t *testing.T) {
		url, accepted := loopback(t, n)
		x, err := provider.NewExportClient(provider.Config{BaseURL: url, Concurrency: n, MaxAttempts: 1})
		require.NoError(t, err)
		for round := range rounds {
			concurrently(n, func(i int) {
				op := domain.OperationID(fmt.Sprintf("OP-%d-%d", round, i))
				r := x.DeliverExport(t.Context(), domain.ExportDelivery{OperationID: op, ExportID: "EXP-1", Use: 1,
					IdempotencyKey: domain.IdempotencyKey("export-" + string(op) + "-a1-u1")})
				assert.Equal(t, domain.Completed, r.Outcome, r.Detail)
			})
			require.Equal(t, int64(n), accepted.Load(), "round %d: connections accepted", round+1)
		}
	})
}

func concurrently(n int, call func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { call(i) })
	}
	wg.Wait()
}

func TestConcurrencyIsBounded(t *testing.T) {
	for _, n := range []int{-1, provider.MaxConcurrency + 1} {
		_, err := provider.New(provider.Config{BaseURL: "http://127.0.0.1:1", Concurrency: n})
		require.ErrorContains(t, err, "concurrency")
	}
}
