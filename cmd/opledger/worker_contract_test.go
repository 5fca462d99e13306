package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
)

// workerSection is docs/api.md's "A worker in any language".
func workerSection(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/api.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## A worker in any language\n")
	require.True(t, ok, "docs/api.md has the section")
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	return section
}

// sentRequest is what the Go client sent the provider.
type sentRequest struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestWorkerContractIsTheClients: docs/api.md's recipe for a worker in any
// language names every header and field the Go client (adapters/provider)
// sends, each with the claim's value it carries, for every built-in
// profile; and a refund made by the recipe is found by the client's lookup,
// under the claim's key, as the reconciler needs.
func TestWorkerContractIsTheClients(t *testing.T) {
	t.Parallel()
	section := workerSection(t)
	req := domain.RefundRequest{OperationID: "OP-7731", OrderID: "ORD-5120", AmountMinor: 4250, Currency: "EUR",
		IdempotencyKey: domain.IdempotencyKeyFor("OP-7731", 1)}
	// Where each value sent comes from in the claim's answer.
	source := map[string]string{
		string(req.OperationID): "operation_id", req.OrderID: "order_id", strconv.FormatInt(req.AmountMinor, 10): "amount_minor",
		req.Currency: "currency", strings.ToLower(req.Currency): "currency", string(req.IdempotencyKey): "idempotency_key",
	}
	for _, name := range provider.BuiltinProfileNames() {
		t.Run(name, func(t *testing.T) {
			profile, ok := provider.BuiltinProfile(name)
			require.True(t, ok)
			sent := make(chan sentRequest, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				sent <- sentRequest{r.Method, r.URL.Path, r.Header.Clone(), body}
				w.WriteHeader(http.StatusServiceUnavailable) // an answer the client will not resend on here (MaxAttempts 1)
			}))
			t.Cleanup(srv.Close)
			c, err := provider.New(provider.Config{Profile: profile, BaseURL: srv.URL, MaxAttempts: 1})
			require.NoError(t, err)
			c.CreateRefund(t.Context(), req)
			got := <-sent

			require.Contains(t, section, "`POST {PROVIDER_URL}"+got.path+"`", "the path")
			require.Equal(t, http.MethodPost, got.method)
			for _, h := range []string{"Idempotency-Key", "Meridian-Request-Id"} {
				if v := got.header.Get(h); v != "" {
					require.Contains(t, section, "`"+h+": {"+source[v]+"}`", "header %s", h)
				}
			}
			ct := got.header.Get("Content-Type")
			require.Contains(t, section, "`Content-Type: "+ct+"`")
			switch ct {
			case "application/x-www-form-urlencoded":
				form, err := url.ParseQuery(string(got.body))
				require.NoError(t, err)
				keys := make([]string, 0, len(form))
				for k := range form {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					from, known := source[form.Get(k)]
					require.True(t, known, "field %s=%s comes from the claim", k, form.Get(k))
					require.Contains(t, section, "`"+k+"={"+from, "docs/api.md names field %s and that it carries %s", k, from)
				}
			case "application/json":
				template := string(got.body)
				for value, from := range source {
					template = strings.ReplaceAll(template, `"`+value+`"`, `"{`+from+`}"`)
					template = strings.ReplaceAll(template, `:`+value+`}`, `:{`+from+`}}`)
					template = strings.ReplaceAll(template, `:`+value+`,`, `:{`+from+`},`)
				}
				require.Contains(t, section, "`"+template+"`", "the body, each value named by its claim field")
			default:
				t.Fatalf("a content type the recipe does not know: %s", ct)
			}
		})
	}

	// An export download's call to the export-delivery service.
	t.Run("export-download", func(t *testing.T) {
		sent := make(chan sentRequest, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			sent <- sentRequest{r.Method, r.URL.Path, r.Header.Clone(), body}
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		c, err := provider.NewExportClient(provider.Config{BaseURL: srv.URL, MaxAttempts: 1})
		require.NoError(t, err)
		d := domain.ExportDelivery{OperationID: "OP-7732", ExportID: "EXP-7781", Use: 2, IdempotencyKey: "export-OP-7732-u2"}
		c.DeliverExport(t.Context(), d)
		got := <-sent
		require.Equal(t, http.MethodPost, got.method)
		require.Contains(t, section, "`POST {EXPORT_DELIVERY_URL}"+got.path+"`")
		require.Equal(t, string(d.IdempotencyKey), got.header.Get("Idempotency-Key"))
		require.Contains(t, section, "`Idempotency-Key: {idempotency_key}`")
		require.Contains(t, section, "`Content-Type: "+got.header.Get("Content-Type")+"`")
		template := strings.NewReplacer(`"`+string(d.OperationID)+`"`, `"{operation_id}"`, `"`+d.ExportID+`"`, `"{export_id}"`,
			`"use":2`, `"use":{use}`).Replace(string(got.body))
		require.Contains(t, section, "`"+template+"`", "the body, each value named by its claim field")
	})

	// The recipe, followed by hand against the simulator, makes a refund the
	// reconciler's lookup finds under the claim's key.
	s, err := sim.New(sim.Config{Profile: sim.ProfileStripeV1})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	form := url.Values{"amount": {"4250"}, "currency": {"eur"}, "order": {req.OrderID},
		"metadata[operation_id]": {string(req.OperationID)}, "metadata[idempotency_key]": {string(req.IdempotencyKey)}}
	hreq, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/refunds", bytes.NewReader([]byte(form.Encode())))
	require.NoError(t, err)
	hreq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hreq.Header.Set("Idempotency-Key", string(req.IdempotencyKey))
	resp, err := http.DefaultClient.Do(hreq)
	require.NoError(t, err)
	var refund struct{ ID, Status string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&refund))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, fmt.Sprint(refund))
	c, err := provider.New(provider.Config{Profile: provider.StripeV1, BaseURL: srv.URL, MaxAttempts: 1, Timeout: 5 * time.Second})
	require.NoError(t, err)
	effects, err := c.LookupByReference(t.Context(), req.OperationID)
	require.NoError(t, err)
	require.Len(t, effects, 1)
	require.Equal(t, refund.ID, effects[0].Reference)
	require.Equal(t, req.IdempotencyKey, effects[0].IdempotencyKey, "found under the claim's key: the reconciler settles it")
	require.Equal(t, 1, s.Ledger().ByOperation[string(req.OperationID)].RefundsCreated)
}
