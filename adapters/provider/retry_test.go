package provider_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// Retries after a fault, default MaxAttempts (3), under each profile. The
// point: every send carries the same key, and what a resend gets depends on
// the provider's documented semantics. The expectations are what the
// simulator does, stated in its package doc.
func TestRetriesResendTheSameKey(t *testing.T) {
	cases := []struct {
		name     string
		profile  sim.Profile
		fault    sim.FaultKind
		outcome  domain.Outcome
		statuses []int // per send, as the client saw them
		created  int
		results  []sim.RequestResult
	}{{
		// v1 saved the 500 although the refund exists: every resend gets it.
		name: "v1 5xx after commit", profile: sim.ProfileStripeV1, fault: sim.Fault5xxAfterCommit,
		outcome: domain.Unknown, statuses: []int{500, 500, 500}, created: 1,
		results: []sim.RequestResult{sim.ResultFailed, sim.ResultReplayed, sim.ResultReplayed},
	}, {
		// v2 answers the committed refund: Completed, still one refund.
		name: "v2 5xx after commit", profile: sim.ProfileStripeV2, fault: sim.Fault5xxAfterCommit,
		outcome: domain.Completed, statuses: []int{500, 200}, created: 1,
		results: []sim.RequestResult{sim.ResultFailed, sim.ResultReplayed},
	}, {
		// v1 replays the saved 500; nothing was created, but the client cannot know.
		name: "v1 5xx before commit", profile: sim.ProfileStripeV1, fault: sim.Fault5xxBeforeCommit,
		outcome: domain.Unknown, statuses: []int{500, 500, 500}, created: 0,
		results: []sim.RequestResult{sim.ResultFailed, sim.ResultReplayed, sim.ResultReplayed},
	}, {
		// v2 executes the failed request again under the same key.
		name: "v2 5xx before commit", profile: sim.ProfileStripeV2, fault: sim.Fault5xxBeforeCommit,
		outcome: domain.Completed, statuses: []int{500, 200}, created: 1,
		results: []sim.RequestResult{sim.ResultFailed, sim.ResultCreated},
	}, {
		// The 200 was saved before the connection was lost: the resend gets it.
		name: "v1 lost response", profile: sim.ProfileStripeV1, fault: sim.FaultLoseResponseAfterCommit,
		outcome: domain.Completed, statuses: []int{0, 200}, created: 1,
		results: []sim.RequestResult{sim.ResultLost, sim.ResultReplayed},
	}, {
		// Nothing was saved by the dropped request: the resend executes.
		name: "v1 dropped before read", profile: sim.ProfileStripeV1, fault: sim.FaultDropConnectionBeforeRead,
		outcome: domain.Completed, statuses: []int{0, 200}, created: 1,
		results: []sim.RequestResult{sim.ResultDropped, sim.ResultCreated},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.profile)
			e.arm(sim.Fault{Kind: c.fault})
			res := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))

			require.Equal(t, c.outcome, res.Outcome, res.Detail)
			require.Equal(t, c.statuses, e.sends.statuses())
			e.requireLedger(len(c.statuses), c.created, 0)
			require.Equal(t, c.results, results(e.sim.Ledger()))
			e.requireOneKey("refund-OP-1-a1")
			if c.outcome == domain.Completed {
				require.Equal(t, e.onlyRefundID(), res.ProviderReference)
			}
		})
	}
}

// A fresh validation rejection after a send that may have reached the
// provider proves nothing about that send: Unknown.
func TestRejectionAfterAnAmbiguousSendIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultDropConnectionBeforeRead})
	e.arm(sim.Fault{Kind: sim.FaultRejectValidation})
	res := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Equal(t, []domain.Outcome{domain.Unknown, domain.NotApplied}, e.sends.outcomes())
	require.Contains(t, res.Detail, "send 1 may have reached the provider")
	e.requireLedger(2, 0, 0)
	e.requireOneKey("refund-OP-1-a1")
}

func TestDialToADeadPortIsNotApplied(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.srv.Close() // listened, now closed: nothing accepts on this port

	res := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.NotApplied, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "connection not established")
	require.Equal(t, []domain.Outcome{domain.NotApplied, domain.NotApplied, domain.NotApplied}, e.sends.outcomes(),
		"nothing was sent, so resending was safe")
	e.requireLedger(0, 0, 0)
}

func TestDialErrorAfterAnAmbiguousSendIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.Fault5xxAfterCommit})
	c := e.client(func(c *provider.Config) {
		// A fresh connection per send: a pooled one the server closed would
		// make the second send ambiguous rather than undialable.
		c.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		c.After = func(time.Duration) <-chan time.Time {
			e.srv.Close() // the provider becomes unreachable after the first send
			return immediately(0)
		}
	})
	res := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Equal(t, domain.NotApplied, e.sends.outcomes()[1])
	e.requireLedger(1, 1, 0)
}

func TestTimeoutAfterSendingIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay})
	res := e.client(maxAttempts(1), func(c *provider.Config) { c.Timeout = 50 * time.Millisecond }).
		CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "timed out (request written)")
	require.Equal(t, 1, e.sim.Ledger().RequestsReceived)
	// The simulator abandons the delayed request once the client has gone.
	require.Eventually(t, func() bool { return e.sim.Ledger().Requests[0].Result == sim.ResultAbandoned },
		5*time.Second, time.Millisecond)
	e.requireLedger(1, 0, 0)
}

func TestTimeoutIsResent(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay})
	res := e.client(func(c *provider.Config) { c.Timeout = 50 * time.Millisecond }).
		CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Completed, res.Outcome, res.Detail)
	require.Equal(t, []domain.Outcome{domain.Unknown, domain.Completed}, e.sends.outcomes())
	require.Equal(t, 2, e.sim.Ledger().RequestsReceived)
	require.Equal(t, 1, e.sim.Ledger().RefundsCreated)
	e.requireOneKey("refund-OP-1-a1")
}

// A response cut short while its body is read: Unknown, resent.
func TestTruncatedBodyIsUnknown(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"re_1",`))
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	}))
	t.Cleanup(srv.Close)
	c, err := provider.New(provider.Config{BaseURL: srv.URL, After: immediately, MaxAttempts: 2})
	require.NoError(t, err)
	res := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome)
	require.Contains(t, res.Detail, "body unreadable")
	require.EqualValues(t, 2, requests.Load())
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
