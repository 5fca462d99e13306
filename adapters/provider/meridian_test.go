package provider_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// The Meridian provider end to end: the client speaks its shape (JSON,
// Meridian-Request-Id, 201/200, its error model) to the simulator, and what
// the client concludes is checked against the simulator's ledger.

func TestMeridianCreateRefundCompletes(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	res := e.client().CreateRefund(t.Context(), refundRequest("OP-4471"))
	require.Equal(t, domain.Completed, res.Outcome, res.Detail)
	e.requireLedger(1, 1, 0)
	l := e.sim.Ledger()
	require.Equal(t, l.Requests[0].RefundID, res.ProviderReference)
	require.True(t, strings.HasPrefix(res.ProviderReference, "mrr_"))
	require.Equal(t, "refund-OP-4471-a1", l.Requests[0].IdempotencyKey)
	require.Equal(t, "OP-4471", l.Requests[0].OperationID, "the merchant reference is our operation id")
	require.Equal(t, []int{http.StatusCreated}, e.sends.statuses())

	var export bytes.Buffer
	require.NoError(t, e.sim.WriteLedgerExport(&export))
	require.Equal(t, "refund_request_id,request_id,merchant_reference,merchant_order,amount_value,currency,status,created_at\n"+
		res.ProviderReference+",refund-OP-4471-a1,OP-4471,ORD-8841,12000,EUR,COMPLETED,"+t0.Format(time.RFC3339)+"\n", export.String())
}

// Each fault, one send: the outcome, and what the ledger says happened.
func TestMeridianEachFaultIsClassified(t *testing.T) {
	for _, c := range []struct {
		fault             sim.FaultKind
		outcome           domain.Outcome
		created, declined int
		status            int
	}{
		{sim.FaultLoseResponseAfterCommit, domain.Unknown, 1, 0, 0},
		{sim.Fault5xxBeforeCommit, domain.Unknown, 0, 0, 500},
		{sim.Fault5xxAfterCommit, domain.Unknown, 1, 0, 500},
		{sim.FaultRejectValidation, domain.NotApplied, 0, 0, 422},
		{sim.FaultDropConnectionBeforeRead, domain.Unknown, 0, 0, 0},
		{sim.FaultDecline, domain.NotApplied, 0, 1, 201},
	} {
		t.Run(string(c.fault), func(t *testing.T) {
			e := newEnv(t, sim.ProfileMeridian)
			e.arm(sim.Fault{Kind: c.fault})
			res := e.client(maxAttempts(1)).CreateRefund(t.Context(), refundRequest("OP-1"))
			require.Equal(t, c.outcome, res.Outcome, res.Detail)
			require.Equal(t, sim.Counters{RequestsReceived: 1, RefundsCreated: c.created, RefundsDeclined: c.declined}, e.sim.Ledger().Counters)
			require.Equal(t, []int{c.status}, e.sends.statuses())
		})
	}
}

// Resends under one key, as Meridian documents them: a request that failed
// without effect is executed again; a committed one is answered from the
// key (200, Meridian-Replayed) and never executed twice.
func TestMeridianRetriesResendTheSameKey(t *testing.T) {
	for _, c := range []struct {
		name     string
		fault    sim.FaultKind
		outcome  domain.Outcome
		statuses []int
		created  int
		results  []sim.RequestResult
	}{
		{"5xx before commit is executed again", sim.Fault5xxBeforeCommit, domain.Completed, []int{500, 201}, 1,
			[]sim.RequestResult{sim.ResultFailed, sim.ResultCreated}},
		{"5xx after commit answers the refund", sim.Fault5xxAfterCommit, domain.Completed, []int{500, 200}, 1,
			[]sim.RequestResult{sim.ResultFailed, sim.ResultReplayed}},
		{"lost response answers the refund", sim.FaultLoseResponseAfterCommit, domain.Completed, []int{0, 200}, 1,
			[]sim.RequestResult{sim.ResultLost, sim.ResultReplayed}},
		{"reset before read executes", sim.FaultDropConnectionBeforeRead, domain.Completed, []int{0, 201}, 1,
			[]sim.RequestResult{sim.ResultDropped, sim.ResultCreated}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, sim.ProfileMeridian)
			e.arm(sim.Fault{Kind: c.fault})
			res := e.client().CreateRefund(t.Context(), refundRequest("OP-1"))
			require.Equal(t, c.outcome, res.Outcome, res.Detail)
			require.Equal(t, c.statuses, e.sends.statuses())
			require.Equal(t, c.created, e.sim.Ledger().RefundsCreated)
			require.Equal(t, c.results, results(e.sim.Ledger()))
			e.requireOneKey("refund-OP-1-a1")
			require.Equal(t, e.onlyRefundID(), res.ProviderReference)
		})
	}
}

func TestMeridianTimeoutAfterSendingIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	e.arm(sim.Fault{Kind: sim.FaultDelay, Duration: sim.MaxFaultDelay})
	res := e.client(maxAttempts(1), func(c *provider.Config) { c.Timeout = 50 * time.Millisecond }).
		CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, res.Outcome, res.Detail)
	require.Contains(t, res.Detail, "timed out (request written)")
	require.Eventually(t, func() bool { return e.sim.Ledger().Requests[0].Result == sim.ResultAbandoned },
		5*time.Second, time.Millisecond)
	e.requireLedger(1, 0, 0)
}

func TestMeridianInProgressIsUnknownThenResent(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	e.arm(sim.Fault{Kind: sim.FaultHoldResponse})
	done := make(chan domain.RefundResult, 1)
	go func() { done <- e.client().CreateRefund(t.Context(), refundRequest("OP-1")) }()
	<-e.sim.Held()
	second := e.client(maxAttempts(1)).CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Unknown, second.Outcome)
	require.Contains(t, second.Detail, "HTTP 409 REQUEST_IN_PROGRESS")
	e.sim.Release()
	require.Equal(t, domain.Completed, (<-done).Outcome)
	e.requireLedger(2, 1, 0)
}

func TestMeridianSameKeyOtherParametersIsUnknown(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	require.Equal(t, domain.Completed, e.client().CreateRefund(t.Context(), refundRequest("OP-1")).Outcome)
	changed := refundRequest("OP-1")
	changed.AmountMinor = 5000
	res := e.client().CreateRefund(t.Context(), changed)
	require.Equal(t, domain.Unknown, res.Outcome)
	require.Contains(t, res.Detail, "HTTP 422 REQUEST_ID_REUSED")
	e.requireLedger(2, 1, 0)
	require.Len(t, e.sends.all(), 2, "the mismatch is not resent")
}

// Retrieve by the key a refund was made under: found in its state, or
// affirmatively none; counted as lookups by the simulator, never a creation.
func TestMeridianRetrieveByKey(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	c := e.client()
	created := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Completed, created.Outcome)
	e.arm(sim.Fault{Kind: sim.FaultDecline})
	declined := c.CreateRefund(t.Context(), refundRequest("OP-2"))
	require.Equal(t, domain.NotApplied, declined.Outcome, declined.Detail)

	got, found, err := c.RetrieveByKey(t.Context(), "refund-OP-1-a1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, domain.ProviderEffect{Reference: created.ProviderReference, OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1",
		State: domain.EffectApplied, AmountMinor: 12000, Currency: "EUR", CreatedAt: t0, Detail: `status "COMPLETED"`}, got)

	got, found, err = c.RetrieveByKey(t.Context(), "refund-OP-2-a1")
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, domain.EffectNotApplied, got.State)
	require.Contains(t, got.Detail, "DECLINED")

	_, found, err = c.RetrieveByKey(t.Context(), "refund-OP-3-a1")
	require.NoError(t, err, "none under the key is an answer, not an error")
	require.False(t, found)

	l := e.sim.Ledger()
	require.Equal(t, 2, l.RequestsReceived, "reads create nothing")
	require.Equal(t, 3, l.Lookups)
	require.Equal(t, 1, l.ByOperation["OP-1"].Lookups)
}

// A request whose execution failed without effect leaves nothing under its
// key: the retrieve says none (and a resend would execute it).
func TestMeridianRetrieveAfterAFailureWithoutEffectFindsNone(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian)
	e.arm(sim.Fault{Kind: sim.Fault5xxBeforeCommit})
	require.Equal(t, domain.Unknown, e.client(maxAttempts(1)).CreateRefund(t.Context(), refundRequest("OP-1")).Outcome)
	_, found, err := e.client().RetrieveByKey(t.Context(), "refund-OP-1-a1")
	require.NoError(t, err)
	require.False(t, found)
	e.requireLedger(1, 0, 1)
}

// Only Meridian's documented 404 NOT_FOUND means none: any other answer is
// an error (the caller must read it as "cannot tell").
func TestMeridianRetrieveFailuresAreErrors(t *testing.T) {
	for name, c := range map[string]struct {
		status    int
		body      string
		attempts  int32
		retryable bool
	}{
		"404 without the code (a proxy's page)": {404, `<html>not here</html>`, 1, false},
		"404 with another code":                 {404, `{"errorCode":"ROUTE_UNKNOWN"}`, 1, false},
		"500":                                   {500, `{"errorCode":"INTERNAL_ERROR","message":"down"}`, provider.DefaultMaxAttempts, true},
		"409 in progress":                       {409, `{"errorCode":"REQUEST_IN_PROGRESS"}`, provider.DefaultMaxAttempts, true},
		"not JSON":                              {200, `<html>`, 1, false},
		"another key's request":                 {200, `{"refundRequestId":"mrr_1","requestId":"refund-OP-9-a1","merchantReference":"OP-9","amount":{"value":5,"currency":"EUR"},"status":"COMPLETED","createdAt":"2025-01-02T03:04:05Z"}`, 1, false},
		"no id":                                 {200, `{"requestId":"refund-OP-1-a1","amount":{"value":5,"currency":"EUR"},"status":"COMPLETED","createdAt":"2025-01-02T03:04:05Z"}`, 1, false},
		"bad time":                              {200, `{"refundRequestId":"mrr_1","requestId":"refund-OP-1-a1","amount":{"value":5,"currency":"EUR"},"status":"COMPLETED","createdAt":"yesterday"}`, 1, false},
	} {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int32
			srv := fixedAnswer(t, &requests, c.status, c.body)
			cl, err := provider.New(provider.Config{Profile: provider.Meridian, BaseURL: srv.URL, After: immediately})
			require.NoError(t, err)
			_, found, err := cl.RetrieveByKey(t.Context(), "refund-OP-1-a1")
			require.Error(t, err)
			require.False(t, found)
			require.Equal(t, c.attempts, requests.Load())
		})
	}
}

// A read the profile does not offer is refused without a request.
func TestReadsAProfileDoesNotOfferSendNothing(t *testing.T) {
	var requests atomic.Int32
	srv := fixedAnswer(t, &requests, 200, `{}`)
	meridian, err := provider.New(provider.Config{Profile: provider.Meridian, BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = meridian.LookupByReference(t.Context(), "OP-1")
	require.ErrorIs(t, err, domain.ErrReadUnsupported)

	stripe, err := provider.New(provider.Config{Profile: provider.StripeV1, BaseURL: srv.URL})
	require.NoError(t, err)
	_, _, err = stripe.RetrieveByKey(t.Context(), "refund-OP-1-a1")
	require.ErrorIs(t, err, domain.ErrReadUnsupported)

	blind := provider.StripeV1
	blind.Name, blind.ReferenceField = "blind", ""
	noRead, err := provider.New(provider.Config{Profile: blind, BaseURL: srv.URL})
	require.NoError(t, err)
	_, err = noRead.LookupByReference(t.Context(), "OP-1")
	require.ErrorIs(t, err, domain.ErrReadUnsupported)
	require.Zero(t, requests.Load())
}

// A profile claiming a read its API has not is refused at construction, as
// is a profile that breaks the profile rules.
func TestClientRefusesAProfileItsAPICannotServe(t *testing.T) {
	withRetrieve := provider.StripeV1
	withRetrieve.Name, withRetrieve.RetrieveByKey = "stripe-retrieve", true
	withLookup := provider.Meridian
	withLookup.Name, withLookup.ReferenceField = "meridian-search", "operation_id"
	otherAPI := provider.Meridian
	otherAPI.Name, otherAPI.API = "adyen", "adyen"
	invalid := provider.Meridian
	invalid.KeyPolicy = "per-call"
	for want, p := range map[string]domain.ProviderProfile{
		"offers no retrieve by idempotency key": withRetrieve,
		"offers no lookup by our reference":     withLookup,
		`unknown api "adyen"`:                   otherAPI,
		"key_policy":                            invalid,
	} {
		_, err := provider.New(provider.Config{Profile: p, BaseURL: "http://127.0.0.1:1"})
		require.ErrorContains(t, err, want)
	}
}

// The Stripe wire writes our reference under the profile's metadata key and
// looks it up by that key.
func TestStripeLookupUsesTheProfilesReferenceField(t *testing.T) {
	p := provider.StripeV1
	p.Name, p.ReferenceField = "stripe-order-ref", "order_ref"
	cfg, err := sim.ConfigFor(p)
	require.NoError(t, err)
	cfg.Start, cfg.Clock = t0, func() time.Time { return t0 }
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := provider.New(provider.Config{Profile: p, BaseURL: srv.URL})
	require.NoError(t, err)
	created := c.CreateRefund(t.Context(), refundRequest("OP-1"))
	require.Equal(t, domain.Completed, created.Outcome, created.Detail)
	effects, err := c.LookupByReference(t.Context(), "OP-1")
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, created.ProviderReference, effects[0].Reference)
	require.Equal(t, sim.Counters{RequestsReceived: 1, RefundsCreated: 1, Lookups: 1}, s.Ledger().ByOperation["OP-1"])
}

// fixedAnswer serves status and body to every request, counting them.
func fixedAnswer(t *testing.T, requests *atomic.Int32, status int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}
