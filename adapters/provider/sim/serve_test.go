package sim_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

func TestServeStopsWithItsContextEvenWhileHolding(t *testing.T) {
	s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV2})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	require.NoError(t, s.Arm(sim.Fault{Kind: sim.FaultHoldResponse}))
	answered := make(chan int, 1)
	go func() {
		body := url.Values{"amount": {"5"}, "currency": {"usd"}, "order": {"o"}}.Encode()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+ln.Addr().String()+"/v1/refunds", strings.NewReader(body))
		req.GetBody = nil
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-s.Held()
	cancel()
	require.NoError(t, <-served)
	require.Equal(t, http.StatusOK, <-answered, "the held response is answered on shutdown")
	require.Equal(t, 1, s.Ledger().RefundsCreated)
}

func TestListenAndServeRejectsABadAddress(t *testing.T) {
	err := sim.ListenAndServe(t.Context(), "256.0.0.1:bad", sim.Config{})
	require.Error(t, err)
}
