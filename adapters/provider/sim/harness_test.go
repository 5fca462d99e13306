package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/provider/sim"
)

// t0 is the simulated clock's start in every test; the base clock is frozen,
// so simulated time moves only through Advance.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	t   *testing.T
	sim *sim.Simulator
	srv *httptest.Server
}

func newHarness(t *testing.T, profile sim.Profile, adjust ...func(*sim.Config)) *harness {
	t.Helper()
	cfg := sim.Config{Profile: profile, Start: t0, Clock: func() time.Time { return t0 }}
	for _, f := range adjust {
		f(&cfg)
	}
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close) // runs before srv.Close: ends holds and delays
	return &harness{t: t, sim: s, srv: srv}
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    error // transport error: no response
}

func (r response) errorType() string {
	var e struct {
		Error struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Type
}

func (r response) refund(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body %s", r.body)
	return m
}

func (r response) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// refundForm is a valid creation body for op.
func refundForm(op string, amount int64) url.Values {
	return url.Values{
		"amount":                 {strconv.FormatInt(amount, 10)},
		"currency":               {"eur"},
		"order":                  {"ORD-8841"},
		"metadata[operation_id]": {op},
	}
}

func (h *harness) postForm(ctx context.Context, key string, form url.Values) response {
	return h.post(ctx, key, "application/x-www-form-urlencoded", form.Encode())
}

func (h *harness) post(ctx context.Context, key, contentType, body string) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/v1/refunds", bytes.NewBufferString(body))
	require.NoError(h.t, err)
	req.GetBody = nil // no transparent transport resend: every request here is one request
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(req)
}

func (h *harness) get(path string) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodGet, h.srv.URL+path, nil)
	require.NoError(h.t, err)
	return do(req)
}

func (h *harness) admin(path, body string) response {
	h.t.Helper()
	req, err := http.NewRequestWithContext(h.t.Context(), http.MethodPost, h.srv.URL+path, bytes.NewBufferString(body))
	require.NoError(h.t, err)
	req.Header.Set("Content-Type", "application/json")
	return do(req)
}

func do(req *http.Request) response {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body, err: err}
}

func (h *harness) arm(f sim.Fault) {
	h.t.Helper()
	require.NoError(h.t, h.sim.Arm(f))
}

func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	_, err := h.sim.Advance(d)
	require.NoError(h.t, err)
}

// requireCounts asserts the ledger's totals.
func (h *harness) requireCounts(received, created, lookups int) {
	h.t.Helper()
	require.Equal(h.t, sim.Counters{RequestsReceived: received, RefundsCreated: created, Lookups: lookups},
		h.sim.Ledger().Counters)
}
