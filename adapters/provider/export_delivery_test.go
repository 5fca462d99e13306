package provider_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// The export-delivery client against the simulator's export-delivery
// service: every claim about deliveries is checked on the simulator's
// ledger (deliveries per operation and per key).

func (e *env) exportClient(adjust ...func(*provider.Config)) *provider.ExportClient {
	e.t.Helper()
	cfg := provider.Config{BaseURL: e.srv.URL, Observer: e.sends, After: immediately}
	for _, f := range adjust {
		f(&cfg)
	}
	c, err := provider.NewExportClient(cfg)
	require.NoError(e.t, err)
	return c
}

func use(n int) domain.ExportDelivery {
	return domain.ExportDelivery{OperationID: "OP-5120", ExportID: "EXP-7781", Use: n,
		IdempotencyKey: domain.IdempotencyKey(fmt.Sprintf("export-OP-5120-a1-u%d", n))}
}

func TestEachUseIsDeliveredOnceUnderItsKey(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	c := e.exportClient()
	for n := 1; n <= 3; n++ {
		r := c.DeliverExport(t.Context(), use(n))
		require.Equal(t, domain.Completed, r.Outcome, r.Detail)
		require.NotEmpty(t, r.ProviderReference)
	}
	l := e.sim.Ledger()
	require.Equal(t, 3, l.ByOperation["OP-5120"].ExportsDelivered)
	require.Equal(t, map[string]int{"export-OP-5120-a1-u1": 1, "export-OP-5120-a1-u2": 1, "export-OP-5120-a1-u3": 1}, l.DeliveriesByKey)
	require.Zero(t, l.RefundsCreated, "no refund was asked for")

	again := c.DeliverExport(t.Context(), use(2))
	require.Equal(t, domain.Completed, again.Outcome)
	require.Contains(t, again.Detail, "(replayed)")
	require.Equal(t, 3, e.sim.Ledger().ExportsDelivered, "a resend of a use delivers nothing again")

	other := use(3)
	other.Use = 4 // use 3's key for another request
	require.Equal(t, domain.Unknown, c.DeliverExport(t.Context(), other).Outcome, "a key reused for another request is not read as anything")
}

// TestALostAnswerIsResentUnderTheSameKey: the first send delivers and its
// answer is lost; the resend, under the same key, is answered from the
// saved delivery: one delivery, Completed.
func TestALostAnswerIsResentUnderTheSameKey(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: "OP-5120"})
	r := e.exportClient().DeliverExport(t.Context(), use(1))
	require.Equal(t, domain.Completed, r.Outcome, r.Detail)
	require.Equal(t, 1, e.sim.Ledger().ExportsDelivered)
	require.Equal(t, 2, e.sim.Ledger().ExportRequests)
	require.Len(t, e.sends.all(), 2)
	for _, s := range e.sends.all() {
		require.Equal(t, domain.IdempotencyKey("export-OP-5120-a1-u1"), s.IdempotencyKey)
	}
}

func TestARefusedDeliveryIsNotApplied(t *testing.T) {
	for _, c := range []struct {
		fault     sim.FaultKind
		outcome   domain.Outcome
		delivered int
	}{
		{sim.FaultRejectValidation, domain.NotApplied, 0},
		{sim.FaultDecline, domain.NotApplied, 0},
		{sim.Fault5xxAfterCommit, domain.Completed, 1}, // resent: the saved delivery answers
	} {
		t.Run(string(c.fault), func(t *testing.T) {
			e := newEnv(t, sim.ProfileStripeV1)
			e.arm(sim.Fault{Kind: c.fault, OperationID: "OP-5120"})
			r := e.exportClient().DeliverExport(t.Context(), use(1))
			require.Equal(t, c.outcome, r.Outcome, r.Detail)
			require.Equal(t, c.delivered, e.sim.Ledger().ExportsDelivered)
		})
	}
	e := newEnv(t, sim.ProfileStripeV1)
	e.arm(sim.Fault{Kind: sim.FaultLoseResponseAfterCommit, OperationID: "OP-5120"})
	r := e.exportClient(maxAttempts(1)).DeliverExport(t.Context(), use(1))
	require.Equal(t, domain.Unknown, r.Outcome, "one send, its answer lost: nobody can tell")
	require.Equal(t, 1, e.sim.Ledger().ExportsDelivered)
}

func TestTheServiceIsReadByOperationAndByKey(t *testing.T) {
	e := newEnv(t, sim.ProfileMeridian) // beside any provider profile
	c := e.exportClient()
	for n := 1; n <= 2; n++ {
		require.Equal(t, domain.Completed, c.DeliverExport(t.Context(), use(n)).Outcome)
	}
	effects, err := c.LookupByReference(t.Context(), "OP-5120")
	require.NoError(t, err)
	require.Len(t, effects, 2)
	for i, fx := range effects {
		require.Equal(t, use(i+1).IdempotencyKey, fx.IdempotencyKey)
		require.Equal(t, domain.EffectApplied, fx.State)
		require.Equal(t, "EXP-7781", fx.ExportID)
		require.Equal(t, domain.OperationID("OP-5120"), fx.OperationID)
	}
	none, err := c.LookupByReference(t.Context(), "OP-NONE")
	require.NoError(t, err)
	require.Empty(t, none)

	fx, found, err := c.RetrieveByKey(t.Context(), use(2).IdempotencyKey)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, effects[1].Reference, fx.Reference)
	_, found, err = c.RetrieveByKey(t.Context(), use(3).IdempotencyKey)
	require.NoError(t, err)
	require.False(t, found, "the service documents 404 not_found: nothing under the key")
	require.Equal(t, 2, e.sim.Ledger().ExportsDelivered, "reads deliver nothing")
}

// TestTheServiceRefusesHostileRequests: what the simulator's service
// refuses is refused before anything is delivered.
func TestTheServiceRefusesHostileRequests(t *testing.T) {
	e := newEnv(t, sim.ProfileStripeV1)
	for _, c := range []struct{ body, key, param string }{
		{`{"export_id":"EXP-1","operation_id":"OP-1","use":1,"use":2}`, "k1", "use"},
		{`{"export_id":"EXP-1","operation_id":"OP-1","Use":1}`, "k2", "Use"},
		{`{"export_id":"EXP-1","operation_id":"OP-1","use":0}`, "k3", "use"},
		{`{"export_id":"EXP-\u0000","operation_id":"OP-1","use":1}`, "k4", "export_id"},
		{`{"operation_id":"OP-1","use":1}`, "k5", "export_id"},
		{`{"export_id":"EXP-1","operation_id":"OP-1","use":1}`, "", "Idempotency-Key"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/v1/export_deliveries", strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if c.key != "" {
			req.Header.Set("Idempotency-Key", c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, c.body)
		require.Contains(t, string(body), `"param":"`+c.param+`"`, c.body)
		require.Contains(t, string(body), `"type":"invalid_request_error"`, c.body)
	}
	require.Zero(t, e.sim.Ledger().ExportsDelivered)
	require.Equal(t, 6, e.sim.Ledger().ExportRequests, "every request counted as received")
}

func TestAnExportClientSpeaksOnlyTheExportService(t *testing.T) {
	_, err := provider.NewExportClient(provider.Config{Profile: provider.StripeV1, BaseURL: "http://127.0.0.1:1"})
	require.ErrorContains(t, err, "not the export-delivery service's")
	_, err = provider.New(provider.Config{Profile: provider.ExportsV1, BaseURL: "http://127.0.0.1:1"})
	require.ErrorContains(t, err, "use NewExportClient")
	require.NoError(t, provider.ExportsV1.Validate())

	// Reads honour the context: a cancelled call asks nothing.
	e := newEnv(t, sim.ProfileStripeV1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = e.exportClient().LookupByReference(ctx, "OP-5120")
	require.Error(t, err)
	r := e.exportClient().DeliverExport(ctx, use(1))
	require.Equal(t, domain.NotApplied, r.Outcome, "nothing sent once the lease is lost")
	require.Zero(t, e.sim.Ledger().ExportRequests)
}
