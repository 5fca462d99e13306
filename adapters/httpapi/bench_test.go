package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore/memory"
)

// BenchmarkLoadgenIteration is scripts/loadgen's iteration (create,
// decide, claim, outcome, a replayed presentation) through the API's
// handler with no network and an in-memory store: what serve's HTTP path
// costs per Claimed, apart from the database. Its allocations per
// iteration are the noise-free measure of that path (serve spends a large
// share of its CPU collecting garbage):
//
//	go test -run XXX -bench LoadgenIteration -benchmem ./adapters/httpapi/
func BenchmarkLoadgenIteration(b *testing.B) {
	c := clock.NewOffset(clock.NewManual(start))
	store := memory.New(c.Now)
	h, err := ledger.New(ledger.Config{Store: store, Clock: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	signer, err := captoken.NewSigner(bytes.Repeat([]byte{42}, captoken.SeedSize))
	if err != nil {
		b.Fatal(err)
	}
	tokens, err := httpapi.ParseTokens(strings.NewReader(tokenFile), "tokens")
	if err != nil {
		b.Fatal(err)
	}
	// The read models are not read by these commands: a pool that never
	// connects.
	pool, err := pgxpool.New(b.Context(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	api, err := httpapi.New(httpapi.Config{Ledger: h, Signer: signer, Tokens: tokens, ReadModels: pool, TestClock: c,
		Metrics: httpapi.NewMetrics(), Logger: slog.New(slog.DiscardHandler), RateLimit: httpapi.RateLimit{Off: true}})
	if err != nil {
		b.Fatal(err)
	}
	call := func(path, role string, body map[string]any, hdr ...string) map[string]any {
		raw, _ := json.Marshal(body)
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+tokenOf[httpapi.Role(role)])
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code >= 300 {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		out := map[string]any{}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			b.Fatalf("%s: %v", path, err)
		}
		return out
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		key := fmt.Sprintf("bench-%d", i)
		op := call("/v1/operations", "agent", map[string]any{"order_id": "ORD-" + key, "amount_minor": 1000, "currency": "EUR",
			"order_total_minor": 5000}, "Idempotency-Key", key)
		opID := op["operation_id"].(string)
		d := call("/v1/operations/"+opID+"/decisions", "agent", map[string]any{"approver": "load", "approval_limit_minor": 5000,
			"facts": map[string]any{"order_refundable": true, "chargeback_open": false, "refunded_minor": 0}})
		token := d["capability"].(map[string]any)["token"].(string)
		cl := call("/v1/claims", "worker", map[string]any{"message_id": "MSG-" + key, "operation_id": opID, "capability": token, "worker_id": "load-1"})
		if cl["status"] != "Claimed" {
			b.Fatalf("claim: %v", cl)
		}
		call("/v1/executions/"+cl["execution_id"].(string)+"/outcome", "worker", map[string]any{"lease_epoch": cl["lease_epoch"],
			"lease_secret": cl["lease_secret"], "outcome": "Completed", "provider_reference": "re_" + key})
		rp := call("/v1/claims", "worker", map[string]any{"message_id": "MSG-R-" + key, "operation_id": opID, "capability": token, "worker_id": "load-1"})
		if rp["status"] != "AlreadyConsumed" {
			b.Fatalf("replay: %v", rp)
		}
	}
}
